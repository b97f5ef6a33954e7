"""The part of a record a `$Key` or `$Value` transform works on, and Kafka's requirements on it (util.Requirements)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from connectors.kafka_connect.data import Schema, Struct
from connectors.transforms.record import ConnectRecord, TransformError


@dataclass(frozen=True)
class Side:
    name: Literal["key", "value"]

    def schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.name == "key" else record.value_schema

    def value(self, record: ConnectRecord) -> Any:
        return record.key if self.name == "key" else record.value

    def updated(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        if self.name == "key":
            return record.replace(key_schema=schema, key=value)
        return record.replace(value_schema=schema, value=value)


KEY, VALUE = Side("key"), Side("value")
SIDES = {"Key": KEY, "Value": VALUE}


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_map(value: Any, purpose: str) -> dict:
    if not isinstance(value, dict):
        raise TransformError(f"only maps are supported without a schema for [{purpose}], found: {_type_name(value)}")
    return value


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise TransformError(f"only structs are supported for [{purpose}], found: {_type_name(value)}")
    return value


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise TransformError(f"a schema is required for [{purpose}]")
    return schema


def struct_schema_like(schema: Schema, fields: tuple) -> Schema:
    """A STRUCT schema with `schema`'s name, optionality and parameters and these fields (SchemaUtil.copySchemaBasics);
    the version goes too."""
    return Schema("STRUCT", schema.optional, schema.name, fields=fields, parameters=schema.parameters,
                  version=schema.version, doc=schema.doc)
