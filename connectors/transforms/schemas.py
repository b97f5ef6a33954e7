"""Transforms on a key's or value's schema: SetSchemaMetadata."""

from __future__ import annotations

import dataclasses

from pydantic import Field, model_validator

from connectors.kafka_connect.data import Struct
from connectors.transforms.classes import ReplaceNullWithDefault, TransformConfig, kafka_transform
from connectors.transforms.record import ConnectRecord, TransformError
from connectors.transforms.sides import Side, require_schema


class SetSchemaMetadataKeys(TransformConfig):
    schema_name: str | None = Field(None, alias="schema.name", description="the schema's new name")
    schema_version: int | None = Field(None, alias="schema.version", description="the schema's new version")
    replace_null_with_default: ReplaceNullWithDefault = True

    @model_validator(mode="after")
    def _something_to_set(self):
        if self.schema_name is None and self.schema_version is None:
            raise ValueError("set schema.name, schema.version or both")
        return self


class SetSchemaMetadata:
    def __init__(self, keys: SetSchemaMetadataKeys, side: Side):
        self.side = side
        self.changes = {k: v for k, v in (("name", keys.schema_name), ("version", keys.schema_version))
                        if v is not None}

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        if schema is None and value is None:
            return record
        schema = require_schema(schema, "updating schema metadata")
        if schema.type != "STRUCT":
            # Kafka's own fails the same way (its ConnectSchema asks a non-struct schema for its fields).
            raise TransformError(f"cannot set the metadata of a {schema.type} schema, only of a struct's")
        updated = dataclasses.replace(schema, **self.changes)
        if isinstance(value, Struct):
            value = Struct(updated, value.values)
        return self.side.updated(record, updated, value)


CLASSES = (
    kafka_transform("SetSchemaMetadata", SetSchemaMetadataKeys, SetSchemaMetadata,
                   "sets the name or version of the key's or value's schema", sides=True),
)
