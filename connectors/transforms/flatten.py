"""Flatten: nested structs (or maps without a schema) become top-level fields named by their path."""

from __future__ import annotations

import dataclasses

from pydantic import Field

from connectors.kafka_connect.data import Field as SchemaField, Schema, Struct
from connectors.transforms.classes import TransformConfig, kafka_transform
from connectors.transforms.record import ConnectRecord, TransformError
from connectors.transforms.sides import Side, require_map, require_struct, struct_schema_like

_KEPT = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES", "ARRAY")


class FlattenKeys(TransformConfig):
    delimiter: str = Field(".", alias="delimiter", description="what joins a nested field's name to its parent's")


class Flatten:
    def __init__(self, keys: FlattenKeys, side: Side):
        self.side = side
        self.delimiter = keys.delimiter
        self._schemas: dict[Schema, Schema] = {}

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self.delimiter}{name}" if prefix else name

    def _flat_map(self, mapping: dict, prefix: str, out: dict) -> None:
        for key, value in mapping.items():
            name = self._name(prefix, key)
            if isinstance(value, dict):
                self._flat_map(require_map(value, "flattening"), name, out)
            elif value is None or isinstance(value, (bool, int, float, str, bytes, bytearray, list, tuple)):
                out[name] = value
            else:
                raise TransformError(f"cannot flatten a {type(value).__name__} (field {name})")

    def _flat_fields(self, schema: Schema, prefix: str, optional: bool, out: list) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            field_optional = optional or field.schema.optional
            if field.schema.type in _KEPT:
                out.append(SchemaField(name, dataclasses.replace(field.schema, optional=field_optional)))
            elif field.schema.type == "STRUCT":
                self._flat_fields(field.schema, name, field_optional, out)
            else:
                raise TransformError(f"cannot flatten a {field.schema.type} (field {name})")

    def _flat_values(self, struct: Struct | None, prefix: str, out: dict) -> None:
        if struct is None:
            return
        for field in struct.schema.fields:
            name = self._name(prefix, field.name)
            if field.schema.type == "STRUCT":
                self._flat_values(struct.get(field.name), name, out)
            else:
                out[name] = struct.get(field.name)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        if value is None:
            return record
        if schema is None:
            out: dict = {}
            self._flat_map(require_map(value, "flattening"), "", out)
            return self.side.updated(record, None, out)
        struct_value = require_struct(value, "flattening")
        if schema not in self._schemas:
            fields: list = []
            self._flat_fields(schema, "", schema.optional, fields)
            self._schemas[schema] = struct_schema_like(schema, tuple(fields))
        new_schema = self._schemas[schema]
        values: dict = {}
        self._flat_values(struct_value, "", values)
        return self.side.updated(record, new_schema, Struct(new_schema, values))


CLASSES = (
    kafka_transform("Flatten", FlattenKeys, Flatten,
                   "makes nested fields top-level ones, their names joined by a delimiter", sides=True),
)
