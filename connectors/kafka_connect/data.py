"""Kafka Connect's schema and value model (org.apache.kafka.connect.data), the part converters produce.

A record's key or value reaches a connector as (schema, value). A schema of None means the
converter produced a schemaless value (plain str, bytes, int, float, bool, dict, list or None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PRIMITIVE_TYPES = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES")
ALL_TYPES = PRIMITIVE_TYPES + ("ARRAY", "MAP", "STRUCT")


@dataclass(frozen=True)
class Schema:
    type: str
    optional: bool = False
    name: str | None = None
    fields: tuple["Field", ...] = ()
    key_schema: "Schema | None" = None
    value_schema: "Schema | None" = None

    def __post_init__(self) -> None:
        if self.type not in ALL_TYPES:
            raise ValueError(f"unknown Connect schema type {self.type!r}")

    def field(self, name: str) -> "Field | None":
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class Field:
    name: str
    schema: Schema


@dataclass(frozen=True)
class Struct:
    """A STRUCT value: its schema and one value per field (missing fields are None)."""

    schema: Schema
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.values.get(name)


OPTIONAL_STRING = Schema("STRING", optional=True)
OPTIONAL_BYTES = Schema("BYTES", optional=True)
BYTES = Schema("BYTES")
