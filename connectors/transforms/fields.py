"""Transforms on the fields of a key or value (a struct with a schema, a map without one): InsertField,
ReplaceField, MaskField, ValueToKey, ExtractField, HoistField."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import Field, field_validator, model_validator

from connectors.kafka_connect.data import TIMESTAMP, Field as SchemaField, Schema, Struct
from connectors.transforms.classes import (
    CommaList, NonEmptyCommaList, ReplaceNullWithDefault, TransformConfig, kafka_transform,
)
from connectors.transforms.field_paths import SyntaxVersion, field_at, path_steps, value_in_map, value_in_struct
from connectors.transforms.record import ConnectRecord, TransformError
from connectors.transforms.sides import Side, require_map, require_struct, struct_schema_like

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)



# --- InsertField -------------------------------------------------------------------------------------------------
class InsertFieldKeys(TransformConfig):
    topic_field: str | None = Field(None, alias="topic.field", description=(
        "a field for the record's topic; end it with '!' for a required field, '?' (the default) for an optional one"))
    partition_field: str | None = Field(None, alias="partition.field",
                                        description="a field for the record's partition, as topic.field")
    offset_field: str | None = Field(None, alias="offset.field",
                                     description="a field for the record's Kafka offset (sinks only), as topic.field")
    timestamp_field: str | None = Field(None, alias="timestamp.field",
                                        description="a field for the record's timestamp, as topic.field")
    static_field: str | None = Field(None, alias="static.field",
                                     description="a field for static.value, as topic.field")
    static_value: str | None = Field(None, alias="static.value", description="the static field's value")
    replace_null_with_default: ReplaceNullWithDefault = True

    @model_validator(mode="after")
    def _something_to_insert(self):
        if not any((self.topic_field, self.partition_field, self.offset_field, self.timestamp_field,
                    self.static_field)):
            raise ValueError("no field to insert: set topic.field, partition.field, offset.field, timestamp.field or "
                             "static.field")
        if self.static_field and self.static_value is None:
            raise ValueError(f"static.field {self.static_field!r} needs static.value")
        return self


def _insertion(spec: str | None) -> tuple[str, bool] | None:
    """(name, optional) of an InsertField spec: `name!` required, `name?` or `name` optional."""
    if spec is None:
        return None
    if spec.endswith(("!", "?")):
        return spec[:-1], spec.endswith("?")
    return spec, True


class InsertField:
    def __init__(self, keys: InsertFieldKeys, side: Side):
        self.side = side
        self.topic = _insertion(keys.topic_field)
        self.partition = _insertion(keys.partition_field)
        self.offset = _insertion(keys.offset_field)
        self.timestamp = _insertion(keys.timestamp_field)
        self.static = _insertion(keys.static_field)
        self.static_value = keys.static_value
        self._schemas: dict[Schema, Schema] = {}

    def _inserted(self, record: ConnectRecord, with_schema: bool) -> list[tuple[str, Any]]:
        values = []
        if self.topic:
            values.append((self.topic[0], record.topic))
        if self.partition and record.partition is not None:
            values.append((self.partition[0], record.partition))
        if self.offset:
            if record.offset is None:
                raise TransformError("offset.field: only a sink's records have a Kafka offset")
            values.append((self.offset[0], record.offset))
        if self.timestamp and record.timestamp is not None:
            stamp = record.timestamp
            values.append((self.timestamp[0], _EPOCH + dt.timedelta(milliseconds=stamp) if with_schema else stamp))
        if self.static and self.static_value is not None:
            values.append((self.static[0], self.static_value))
        return values

    def _updated_schema(self, schema: Schema) -> Schema:
        if schema not in self._schemas:
            added = []
            for spec, type_name, name in ((self.topic, "STRING", None), (self.partition, "INT32", None),
                                          (self.offset, "INT64", None), (self.timestamp, "INT64", TIMESTAMP),
                                          (self.static, "STRING", None)):
                if spec:
                    # Connect's logical schemas are version 1.
                    added.append(SchemaField(spec[0], Schema(type_name, spec[1], name, version=1 if name else None)))
            fields = {f.name: f for f in schema.fields}
            for field in added:  # a field of the same name is replaced in place, as SchemaBuilder does not allow
                fields[field.name] = field
            self._schemas[schema] = struct_schema_like(schema, tuple(fields.values()))
        return self._schemas[schema]

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.side.value(record)
        if value is None:
            return record
        if self.side.schema(record) is None:
            updated = dict(require_map(value, "field insertion"))
            updated.update(self._inserted(record, with_schema=False))
            return self.side.updated(record, None, updated)
        struct = require_struct(value, "field insertion")
        schema = self._updated_schema(struct.schema)
        values = dict(struct.values)
        values.update(self._inserted(record, with_schema=True))
        return self.side.updated(record, schema, Struct(schema, values))


# --- ReplaceField ------------------------------------------------------------------------------------------------
class ReplaceFieldKeys(TransformConfig):
    exclude: CommaList = Field((), alias="exclude", description="fields to drop (a comma list)")
    include: CommaList = Field((), alias="include",
                               description="fields to keep, all others dropped (a comma list; empty: all)")
    renames: CommaList = Field((), alias="renames", description="old:new pairs (a comma list: foo:bar,abc:xyz)")
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("renames")
    @classmethod
    def _pairs(cls, renames: tuple[str, ...]) -> tuple[str, ...]:
        for pair in renames:
            if len(pair.split(":")) != 2:
                raise ValueError(f"{pair!r} is not an old:new pair")
        return renames


class ReplaceField:
    def __init__(self, keys: ReplaceFieldKeys, side: Side):
        self.side = side
        self.exclude, self.include = frozenset(keys.exclude), frozenset(keys.include)
        self.renames = dict(pair.split(":") for pair in keys.renames)
        self._schemas: dict[Schema, Schema] = {}

    def _kept(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.side.value(record)
        if value is None:
            return record
        if self.side.schema(record) is None:
            fields = require_map(value, "field replacement")
            return self.side.updated(record, None, {self.renames.get(k, k): v for k, v in fields.items()
                                                    if self._kept(k)})
        struct = require_struct(value, "field replacement")
        if struct.schema not in self._schemas:
            kept = tuple(SchemaField(self.renames.get(f.name, f.name), f.schema) for f in struct.schema.fields
                         if self._kept(f.name))
            self._schemas[struct.schema] = struct_schema_like(struct.schema, kept)
        schema = self._schemas[struct.schema]
        values = {self.renames.get(f.name, f.name): struct.get(f.name) for f in struct.schema.fields
                  if self._kept(f.name)}
        return self.side.updated(record, schema, Struct(schema, values))


# --- MaskField ---------------------------------------------------------------------------------------------------
class MaskFieldKeys(TransformConfig):
    fields: NonEmptyCommaList = Field(alias="fields", description="the fields to mask (a comma list)")
    replacement: str | None = Field(
        None, alias="replacement", min_length=1,
        description="what a masked number or string becomes (default: 0, false, an empty string, list or map)")
    replace_null_with_default: ReplaceNullWithDefault = True


def _masked_empty(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float, Decimal)):
        return type(value)(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, dt.datetime):
        return _EPOCH
    if isinstance(value, dt.date):
        return dt.date(1970, 1, 1)
    if isinstance(value, dt.time):
        return dt.time(0)
    if isinstance(value, (list, tuple)):
        return []
    if isinstance(value, dict):
        return {}
    raise TransformError(f"cannot mask a value of type {type(value).__name__}")


def _masked_by(value: Any, replacement: str) -> Any:
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
            raise TransformError(f"cannot mask a value of type {type(value).__name__} with a replacement")
        if isinstance(value, str):
            return replacement
        return type(value)(replacement.strip() if isinstance(value, int) else replacement)
    except (ValueError, InvalidOperation):
        raise TransformError(f"cannot turn the replacement {replacement!r} into a number") from None


class MaskField:
    def __init__(self, keys: MaskFieldKeys, side: Side):
        self.side = side
        self.fields = frozenset(keys.fields)
        self.replacement = keys.replacement

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        return _masked_empty(value) if self.replacement is None else _masked_by(value, self.replacement)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.side.value(record)
        if self.side.schema(record) is None:
            updated = dict(require_map(value, "masking fields"))
            for name in self.fields:
                updated[name] = self._masked(updated.get(name))
            return self.side.updated(record, None, updated)
        struct = require_struct(value, "masking fields")
        values = {f.name: self._masked(struct.get(f.name)) if f.name in self.fields else struct.get(f.name)
                  for f in struct.schema.fields}
        return self.side.updated(record, struct.schema, Struct(struct.schema, values))


# --- ValueToKey --------------------------------------------------------------------------------------------------
class ValueToKeyKeys(TransformConfig):
    fields: NonEmptyCommaList = Field(alias="fields",
                                      description="the value's fields that make the new key (a comma list)")
    replace_null_with_default: ReplaceNullWithDefault = True


class ValueToKey:
    def __init__(self, keys: ValueToKeyKeys):
        self.fields = keys.fields
        self._schemas: dict[Schema, Schema] = {}

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        if record.value_schema is None:
            value = require_map(record.value, "copying fields from value to key")
            return record.replace(key_schema=None, key={name: value.get(name) for name in self.fields})
        struct = require_struct(record.value, "copying fields from value to key")
        if struct.schema not in self._schemas:
            fields = []
            for name in self.fields:
                found = struct.schema.field(name)
                if found is None:
                    raise TransformError(f"field {name!r} is not in the value")
                fields.append(found)
            self._schemas[struct.schema] = Schema("STRUCT", fields=tuple(fields))
        schema = self._schemas[struct.schema]
        return record.replace(key_schema=schema, key=Struct(schema, {name: struct.get(name) for name in self.fields}),
                              value_schema=struct.schema)


# --- ExtractField ------------------------------------------------------------------------------------------------
class ExtractFieldKeys(TransformConfig):
    field: str = Field(alias="field", description="the field whose value replaces the whole key or value")
    field_syntax_version: SyntaxVersion = Field(
        "V1", alias="field.syntax.version",
        description="V1: `field` is a top-level name; V2: a dotted path into nested fields (`a.b`; a name with a dot "
                    "in backticks)")
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("field_syntax_version", mode="before")
    @classmethod
    def _any_case(cls, version: Any) -> Any:
        return version.upper() if isinstance(version, str) else version

    @model_validator(mode="after")
    def _path_parses(self):
        path_steps(self.field, self.field_syntax_version)
        return self


class ExtractField:
    def __init__(self, keys: ExtractFieldKeys, side: Side):
        self.side = side
        self.path = keys.field
        self.steps = path_steps(keys.field, keys.field_syntax_version)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        if schema is None:
            mapping = None if value is None else require_map(value, "field extraction")
            return self.side.updated(record, None, None if mapping is None else value_in_map(mapping, self.steps))
        struct = None if value is None else require_struct(value, "field extraction")
        found = field_at(schema, self.steps)
        if found is None:
            raise TransformError(f"unknown field: {self.path}")
        return self.side.updated(record, found.schema, None if struct is None else value_in_struct(struct, self.steps))


# --- HoistField --------------------------------------------------------------------------------------------------
class HoistFieldKeys(TransformConfig):
    field: str = Field(alias="field", description="the name of the one field the key or value is wrapped in")


class HoistField:
    def __init__(self, keys: HoistFieldKeys, side: Side):
        self.side = side
        self.field = keys.field
        self._schemas: dict[Schema, Schema] = {}

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        if schema is None:
            return self.side.updated(record, None, {self.field: value})
        if value is None and not schema.optional:
            raise TransformError(f"a null cannot fill the required field {self.field!r}")
        if schema not in self._schemas:
            self._schemas[schema] = Schema("STRUCT", fields=(SchemaField(self.field, schema),))
        hoisted = self._schemas[schema]
        return self.side.updated(record, hoisted, Struct(hoisted, {self.field: value}))


CLASSES = (
    kafka_transform("InsertField", InsertFieldKeys, InsertField,
                   "adds the record's topic, partition, offset, timestamp or a static value as fields", sides=True),
    kafka_transform("ReplaceField", ReplaceFieldKeys, ReplaceField,
                   "keeps, drops and renames fields", sides=True),
    kafka_transform("MaskField", MaskFieldKeys, MaskField,
                   "replaces fields' values with an empty value of their type, or a replacement", sides=True),
    kafka_transform("ValueToKey", ValueToKeyKeys, ValueToKey,
                   "makes the key from fields of the value"),
    kafka_transform("ExtractField", ExtractFieldKeys, ExtractField,
                   "replaces the key or value by one of its fields", sides=True),
    kafka_transform("HoistField", HoistFieldKeys, HoistField,
                   "wraps the key or value in a struct or map of one field", sides=True),
)
