"""Adding and removing entries of the bridges file as text, so its comments and layout stay as written: an
entry is cut out by the lines YAML's composer says it spans, and a new one is written after the last entry
with the same indentation. The result must load as a whole (every bridge validated) before it replaces
the file, atomically; otherwise nothing is written."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from connectors.config.bridges_file import BridgeConfigError, load_bridges
from connectors.plugins import plugin_for

_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_.-]*:[^}]*\}$")  # ${provider:path:key} or ${env:VAR}


def _entries(text: str, path: Path) -> list[yaml.MappingNode]:
    root = yaml.compose(text)
    if root is None or not isinstance(root, yaml.MappingNode):
        raise BridgeConfigError(f"{path}: expected a top-level 'bridges:' list")
    for key, value in root.value:
        if key.value == "bridges" and isinstance(value, yaml.SequenceNode):
            return value.value
        if key.value == "bridges" and value.tag == "tag:yaml.org,2002:null":  # every entry removed
            return []
    raise BridgeConfigError(f"{path}: expected a top-level 'bridges:' list")


def _name_of(node: yaml.MappingNode) -> str | None:
    for key, value in node.value:
        if key.value == "name" and isinstance(value, yaml.ScalarNode):
            return value.value
    return None


def _end_line(node: yaml.Node) -> int:
    """The first line after the node. A block collection ends where its last value ends (its own end mark is
    where the next token starts, past any comment lines that follow it)."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        return _end_line(last[1] if isinstance(node, yaml.MappingNode) else last)
    return node.end_mark.line + (1 if node.end_mark.column > 0 else 0)


def check_no_plain_secrets(connector: str | None, keys: dict[str, Any]) -> None:
    """A secret given on the command line would be written into the file: only references are taken."""
    plugin = plugin_for(connector) if connector else None
    secret = plugin.config_model.secret_keys() if plugin else frozenset()
    for key in sorted(secret & set(keys)):
        if not (isinstance(keys[key], str) and _REFERENCE.match(keys[key])):
            raise BridgeConfigError(f"key '{key}' is a secret: give a reference such as ${{env:VAR}} or "
                                    f"${{file:/path/to/file:key}}, not the value (it would be written to the file)")


def add_entry(path: Path, entry: dict[str, Any]) -> None:
    text = path.read_text()
    entries = _entries(text, path)
    name = entry["name"]
    if any(_name_of(node) == name for node in entries):
        raise BridgeConfigError(f"{path}: a bridge named {name!r} exists already")
    check_no_plain_secrets(entry.get("connector"), entry.get("config") or {})
    lines = text.splitlines(keepends=True)
    if entries:
        indent, at = entries[-1].start_mark.column - 2, _end_line(entries[-1])
    else:
        indent, at = 2, len(lines)
    while at > 0 and not lines[at - 1].strip():  # after the last entry's own lines, not after blank ones
        at -= 1
    block = yaml.safe_dump([entry], sort_keys=False, default_flow_style=False, width=120)
    block = "".join(" " * indent + line if line.strip() else line for line in block.splitlines(keepends=True))
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    _replace_checked(path, "".join([*lines[:at], "\n", block, *lines[at:]]))


def remove_entry(path: Path, name: str) -> None:
    text = path.read_text()
    matches = [node for node in _entries(text, path) if _name_of(node) == name]
    if not matches:
        raise BridgeConfigError(f"{path}: no bridge named {name!r}")
    node = matches[0]
    lines = text.splitlines(keepends=True)
    start, end, dash = node.start_mark.line, _end_line(node), node.start_mark.column - 2
    while start > 0 and lines[start - 1].startswith(" " * dash + "#"):  # its own comment lines above it
        start -= 1
    while end < len(lines) and not lines[end].strip():  # the blank lines that separated it
        end += 1
    _replace_checked(path, "".join([*lines[:start], *lines[end:]]))


def _replace_checked(path: Path, text: str) -> None:
    """Write `text` beside the file, load it as the product would, then move it over the file."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        try:
            load_bridges(temporary)
        except BridgeConfigError as exc:
            raise BridgeConfigError(f"nothing written: {str(exc).replace(temporary, str(path))}") from None
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
