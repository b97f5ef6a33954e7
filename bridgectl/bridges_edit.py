"""Adding and removing entries of the bridges file with a round-trip YAML library (ruamel.yaml), so its comments,
order and quoting stay as written, whether the `bridges:` list is written in block or in flow style (the empty
`bridges: []` included). The result must load as a whole (every bridge validated) before it replaces the file,
atomically; otherwise nothing is written.

ruamel keeps a comment that follows a block collection on its deepest last key, so the comments that close the
list ("# the end") would stay above an entry appended after them, or go with the last entry when it is removed:
those are moved to the list's new last entry."""

from __future__ import annotations

import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.tokens import CommentToken

from connectors.bridges_file import BridgeConfigError, load_bridges
from connectors.plugins import plugin_for

_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_.-]*:[^}]*\}$")  # ${provider:path:key} or ${env:VAR}


def _round_trip() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 120
    yaml.indent(mapping=2, sequence=4, offset=2)  # `  - name:` under `bridges:`, as the shipped file is written
    return yaml


def _load(path: Path) -> tuple[CommentedMap, CommentedSeq]:
    """The document and its `bridges` list (made a block list: an empty or flow-style one too)."""
    try:
        doc = _round_trip().load(path.read_text())
    except YAMLError as exc:
        raise BridgeConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, CommentedMap) or "bridges" not in doc:
        raise BridgeConfigError(f"{path}: expected a top-level 'bridges:' list")
    if doc["bridges"] is None:  # `bridges:` with every entry removed
        doc["bridges"] = CommentedSeq()
    entries = doc["bridges"]
    if not isinstance(entries, CommentedSeq):
        raise BridgeConfigError(f"{path}: expected a top-level 'bridges:' list")
    token = _slot_token((doc, "bridges"))
    if (entries.fa.flow_style() or not entries) and token is not None and "\n" in token.value.rstrip("\n"):
        # `bridges: [...]  # a comment` and comment lines after it: those lines close the list.
        own, after = token.value.split("\n", 1)
        token.value = own + "\n"  # the same token: it keeps its column, on the key's line
        if entries:
            _set_closing(doc, entries, _closing(doc, entries) + after)
        else:
            doc.ca.end = [CommentToken(after, CommentMark(0), None), *(doc.ca.end or [])]
    if entries and entries.fa.flow_style():
        if token is not None and token.value.strip():  # the key's own comment, no longer after a long flow list
            doc.ca.items["bridges"][2] = CommentToken(token.value.lstrip(" "), CommentMark(len("bridges:  ")), None)
        entries.fa.set_block_style()
    return doc, entries


def _dump(doc: CommentedMap) -> str:
    out = io.StringIO()
    _round_trip().dump(doc, out)
    return out.getvalue()


def _closing_slot(parent: Any, key: Any) -> tuple[Any, Any]:
    """(collection, key) whose comment slot holds the lines after `parent[key]`: the deepest last key of a block
    collection, else the key itself (a scalar, a flow collection)."""
    slot, node = (parent, key), parent[key]
    while (_slot_token(slot) is None and isinstance(node, (CommentedMap, CommentedSeq)) and len(node)
           and not node.fa.flow_style()):
        key = list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
        slot, node = (node, key), node[key]
    return slot


def _closing(doc: CommentedMap, entries: CommentedSeq) -> str:
    """The comment lines that close the list (after its last entry, or after `bridges: []`), as text that starts
    with the end of the line before them."""
    if entries:
        token = _slot_token(_closing_slot(entries, len(entries) - 1))
        return token.value if token is not None else "\n"
    return "\n" + "".join(token.value for token in doc.ca.end or [])


def _set_closing(doc: CommentedMap, entries: CommentedSeq, text: str) -> None:
    if entries:
        _set_slot(_closing_slot(entries, len(entries) - 1), text)
    else:  # after `bridges: []` (a comment held on the key would be written between it and its `[]`)
        doc.ca.end = [CommentToken(text.lstrip("\n"), CommentMark(0), None)] if text.strip() else None


def _slot_token(slot: tuple[Any, Any]) -> CommentToken | None:
    node, key = slot
    item = node.ca.items.get(key)
    return item[2 if isinstance(node, CommentedMap) else 0] if item else None


def _set_slot(slot: tuple[Any, Any], text: str) -> None:
    """The lines after the slot's key: `text` starts with the end of the key's own line."""
    node, key = slot
    item = node.ca.items.setdefault(key, [None, None, None, None])
    token = CommentToken(text, CommentMark(0), None) if text != "\n" else None  # "\n" alone: nothing after the key
    item[2 if isinstance(node, CommentedMap) else 0] = token


def _name_of(entry: Any) -> str | None:
    return entry.get("name") if isinstance(entry, dict) else None


def check_no_plain_secrets(connector: str | None, keys: dict[str, Any]) -> None:
    """A secret given on the command line would be written into the file: only references are taken."""
    plugin = plugin_for(connector) if connector else None
    secret = plugin.config_model.secret_keys() if plugin else frozenset()
    for key in sorted(secret & set(keys)):
        if not (isinstance(keys[key], str) and _REFERENCE.match(keys[key])):
            raise BridgeConfigError(f"key '{key}' is a secret: give a reference such as ${{env:VAR}} or "
                                    f"${{file:/path/to/file:key}}, not the value (it would be written to the file)")


def add_entry(path: Path, entry: dict[str, Any]) -> None:
    doc, entries = _load(path)
    name = entry["name"]
    if any(_name_of(e) == name for e in entries):
        raise BridgeConfigError(f"{path}: a bridge named {name!r} exists already")
    check_no_plain_secrets(entry.get("connector"), entry.get("config") or {})
    new = _round_trip().load(_dump(CommentedMap(entries=[entry])))["entries"][0]  # block style throughout
    closing = _closing(doc, entries)
    _set_closing(doc, entries, "\n\n")  # a blank line between the last entry and the new one
    entries.fa.set_block_style()
    entries.append(new)
    _set_slot(_closing_slot(entries, len(entries) - 1), closing)
    _replace_checked(path, _dump(doc))


def remove_entry(path: Path, name: str) -> None:
    doc, entries = _load(path)
    matches = [i for i, e in enumerate(entries) if _name_of(e) == name]
    if not matches:
        raise BridgeConfigError(f"{path}: no bridge named {name!r}")
    index = matches[0]
    closing = _closing(doc, entries)
    del entries[index]  # its own comment lines above it go with it
    if index == len(entries):  # it was the last: the list's closing comments stay at its end
        _set_closing(doc, entries, closing)
    if not entries:
        entries.fa.set_flow_style()  # `bridges: []`, its comment after it
    if index == 0:  # the first entry's own comment lines are the list's start comment
        first = entries.ca.items.get(0)
        start = [t for t in (first[1] or []) if t.value.strip()] if first else []
        entries.ca.comment = [None, start or None]
        doc.ca.items.setdefault("bridges", [None, None, None, None])[3] = start or None
        if first:
            first[1] = None
    _replace_checked(path, _dump(doc))


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
