"""The docs' key tables, generated from the connectors' config models (one source for every key): a page per
installed connector under docs/keys/, each key with its type or choices, default, whether it is secret, and its
description. `python -m bridgectl.key_tables` writes them; the suite fails when a committed page differs."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from bridgectl.paths import PROJECT_ROOT
from connectors.plugins import installed_plugins

KEYS_DIR = PROJECT_ROOT / "docs" / "keys"


def _type(annotation) -> str:
    """A key's type as a reader of a .properties file sees it: its choices, or int, bool, text."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if args and typing.get_origin(annotation) is not typing.Literal and len(args) == 1:
        return _type(args[0])
    if any(typing.get_origin(a) is typing.Literal for a in args):
        return " \\| ".join(_type(a) for a in args)
    if annotation is SecretStr or SecretStr in args:
        return "text (secret)"
    names = {bool: "bool", int: "int", float: "number", str: "text"}
    return names.get(annotation, "text")


def _default(field) -> str:
    if field.is_required():
        return "required"
    default = field.default
    if default is PydanticUndefined or default is None:
        return "none"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    return f"`{default}`"


def _cell(text: str) -> str:
    """One table cell: on one line, with what Markdown would read as a column or an HTML tag escaped."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def key_table(model: type[BaseModel]) -> str:
    rows = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for name, field in sorted(model.model_fields.items(), key=lambda item: item[1].alias or item[0]):
        rows.append(f"| `{field.alias or name}` | {_type(field.annotation)} | {_cell(_default(field))} | "
                    f"{_cell(field.description or '')} |")
    return "\n".join(rows) + "\n"


def pages() -> dict[Path, str]:
    """docs/keys/<connector>.md for every installed connector, and the section's index."""
    plugins = dict(sorted(installed_plugins().items()))
    out = {}
    index = ["# Keys of every connector", "",
             "Generated from the connectors' config models (`python -m bridgectl.key_tables`); a key without a "
             "description is described on the [Connectors](../connectors.md) page.", ""]
    for name, plugin in plugins.items():
        out[KEYS_DIR / f"{name}.md"] = (f"# {name}\n\n`connector.class`: `{plugin.java_class}`\n\n"
                                       + key_table(plugin.config_model))
        index.append(f"- [{name}]({name}.md)")
    out[KEYS_DIR / "index.md"] = "\n".join(index) + "\n"
    return out


def main() -> None:
    KEYS_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in pages().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
