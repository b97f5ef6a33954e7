"""KIP-821's field paths (`field.syntax.version`): V1 names a top-level field; V2 is a dotted path into nested
structs and maps, a step in backticks when its name holds a dot (field.SingleFieldPath)."""

from __future__ import annotations

from typing import Any, Literal

from connectors.kafka_connect.data import Field, Schema, Struct
from connectors.transforms.sides import require_map, require_struct

SyntaxVersion = Literal["V1", "V2"]


def path_steps(path: str, version: str) -> tuple[str, ...]:
    """The steps of a path; ValueError for a backtick without its pair."""
    if version.upper() == "V1":
        return (path,)
    steps: list[str] = []
    i = 0
    while 0 <= i < len(path):
        if path[i] != "`":
            end = path.find(".", i)
            steps.append(path[i:] if end < 0 else path[i:end])
            i = len(path) if end < 0 else end + 1
            continue
        opened, i = i, i + 1
        name, start = [], i
        while True:
            i = path.find("`", i)
            if i < 0:
                raise ValueError(f"the backtick at position {opened} of {path!r} has no pair; put a backslash "
                                 "before it to escape it")
            escaped = path[i - 1] == "\\"
            if i >= len(path) - 1:
                if escaped:
                    raise ValueError(f"the backtick at position {opened} of {path!r} has no pair")
                name.append(path[start:i])
                steps.append("".join(name))
                i += 1
                break
            if path[i + 1] != ".":
                i += 1
                continue
            if escaped:
                name.append(path[start:i - 1] + "`")
                i += 1
                start = i
                continue
            name.append(path[start:i])
            steps.append("".join(name))
            i += 2
            break
    if path.endswith("."):
        steps.append("")
    return tuple(steps)


def field_at(schema: Schema | None, steps: tuple[str, ...]) -> Field | None:
    current = schema
    for step in steps[:-1]:
        found = current.field(step) if current is not None and current.type == "STRUCT" else None
        if found is None:
            return None
        current = found.schema
    return current.field(steps[-1]) if current is not None and current.type == "STRUCT" else None


def value_in_struct(struct: Struct | None, steps: tuple[str, ...]) -> Any:
    current = struct
    for step in steps[:-1]:
        if current is None or current.schema.field(step) is None:
            return None
        current = require_struct(current.get(step), "nested field access") if current.get(step) is not None else None
    if current is None or current.schema.field(steps[-1]) is None:
        return None
    return current.get(steps[-1])


def value_in_map(mapping: dict | None, steps: tuple[str, ...]) -> Any:
    current = mapping
    for step in steps[:-1]:
        if current is None:
            return None
        inner = current.get(step)
        current = None if inner is None else require_map(inner, "nested field access")
    return None if current is None else current.get(steps[-1])
