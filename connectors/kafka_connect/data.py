"""Kafka Connect's schema and value model (org.apache.kafka.connect.data), the part converters produce.

A record's key or value reaches a connector as (schema, value). A schema of None means the
converter produced a schemaless value (plain str, bytes, int, float, bool, dict, list or None).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
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
    # Connect's schema parameters, as (key, value) pairs: a Decimal's "scale", say.
    parameters: tuple[tuple[str, str], ...] = ()
    version: int | None = None
    doc: str | None = None

    def __post_init__(self) -> None:
        if self.type not in ALL_TYPES:
            raise ValueError(f"unknown Connect schema type {self.type!r}")

    def field(self, name: str) -> "Field | None":
        return next((f for f in self.fields if f.name == name), None)

    def parameter(self, key: str) -> str | None:
        return dict(self.parameters).get(key)


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


# Connect's logical types: a name on a primitive schema. Values are Python's own types for them
# (Decimal, date, time, aware UTC datetime), as Connect hands Java's BigDecimal and java.util.Date.
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
LOGICAL_TYPES = {DECIMAL: "BYTES", DATE: "INT32", TIME: "INT32", TIMESTAMP: "INT64"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DAY = dt.date(1970, 1, 1)


def schemaless_type(value: Any) -> str | None:
    """The Connect type of a value without a schema, as its Python type implies (a JSON number without a schema is an
    INT64 or a FLOAT64); None for a type Connect has no name for."""
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, float):
        return "FLOAT64"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, (bytes, bytearray)):
        return "BYTES"
    if isinstance(value, (list, tuple)):
        return "ARRAY"
    if isinstance(value, dict):
        return "MAP"
    if isinstance(value, Struct):
        return "STRUCT"
    return None


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    return Schema("BYTES", optional, DECIMAL, parameters=(("scale", str(scale)),))


def is_logical(schema: Schema | None) -> bool:
    return schema is not None and schema.name in LOGICAL_TYPES


def to_physical(schema: Schema, value: Any) -> Any:
    """A logical value as its schema's primitive (Connect's fromLogical): the bytes of the unscaled
    Decimal, days or milliseconds since the epoch."""
    if value is None or schema.name not in LOGICAL_TYPES:
        return value
    if schema.name == DECIMAL:
        scale = int(schema.parameter("scale") or 0)
        unscaled = int(value.scaleb(scale))
        return unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
    if schema.name == DATE:
        return (value - _EPOCH_DAY).days
    if schema.name == TIME:
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


def from_physical(schema: Schema, value: Any) -> Any:
    """A primitive as its schema's logical value (Connect's toLogical)."""
    if value is None or schema.name not in LOGICAL_TYPES:
        return value
    if schema.name == DECIMAL:
        scale = int(schema.parameter("scale") or 0)
        return Decimal(int.from_bytes(bytes(value), "big", signed=True)).scaleb(-scale)
    if schema.name == DATE:
        return _EPOCH_DAY + dt.timedelta(days=int(value))
    if schema.name == TIME:
        return (dt.datetime.min + dt.timedelta(milliseconds=int(value))).time()
    return _EPOCH + dt.timedelta(milliseconds=int(value))
