"""Transforms on a record's headers: InsertHeader, DropHeaders, HeaderFrom."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from connectors.transforms.classes import NonEmptyCommaList, ReplaceNullWithDefault, TransformConfig, kafka_transform
from connectors.transforms.java_forms import parse_literal
from connectors.transforms.record import ConnectRecord, Header, TransformError
from connectors.transforms.sides import Side, require_map, require_struct, struct_schema_like



class InsertHeaderKeys(TransformConfig):
    header: str = Field(alias="header", min_length=1, description="the name of the header to add")
    value_literal: str | None = Field(
        None, alias="value.literal",
        description="its value, typed as Connect reads a literal: true/false a boolean, a whole number the smallest "
                    "integer type holding it, other numbers floats, anything else a string")


class InsertHeader:
    def __init__(self, keys: InsertHeaderKeys):
        schema, value = parse_literal(keys.value_literal)
        self.header = Header(keys.header, schema, value)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        # Added even when a header of that name is there already, as Kafka does.
        return record.replace(headers=(*record.headers, self.header))


class DropHeadersKeys(TransformConfig):
    headers: NonEmptyCommaList = Field(alias="headers",
                                       description="the names of the headers to remove (a comma list)")


class DropHeaders:
    def __init__(self, keys: DropHeadersKeys):
        self.names = frozenset(keys.headers)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        return record.replace(headers=tuple(h for h in record.headers if h.key not in self.names))


class HeaderFromKeys(TransformConfig):
    fields: NonEmptyCommaList = Field(alias="fields",
                                      description="the fields whose values become headers (a comma list)")
    headers: NonEmptyCommaList = Field(alias="headers",
                                       description="the header names, one per field, in the same order")
    operation: Literal["move", "copy"] = Field(
        alias="operation", description="`move` removes the fields from the key or value; `copy` keeps them")
    replace_null_with_default: ReplaceNullWithDefault = True

    @model_validator(mode="after")
    def _one_header_per_field(self):
        if len(self.fields) != len(self.headers):
            raise ValueError("'fields' and 'headers' must have the same number of items")
        return self


class HeaderFrom:
    def __init__(self, keys: HeaderFromKeys, side: Side):
        self.pairs = tuple(zip(keys.fields, keys.headers))
        self.move = keys.operation == "move"
        self.side = side

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        purpose = f"header {'move' if self.move else 'copy'}"
        if schema is None:
            fields = require_map(value, purpose)
            added = tuple(Header(header, None, fields.get(field)) for field, header in self.pairs)
            if self.move:
                moved = {field for field, _ in self.pairs}
                value = {k: v for k, v in fields.items() if k not in moved}
            return self.side.updated(record, None, value).replace(headers=(*record.headers, *added))
        struct = require_struct(value, purpose)
        added = []
        for field, header in self.pairs:
            found = schema.field(field)
            if found is None:
                raise TransformError(f"field {field!r} is not in the {self.side.name}'s schema")
            added.append(Header(header, found.schema, struct.get(field)))
        if self.move:
            moved = {field for field, _ in self.pairs}
            schema = struct_schema_like(schema, tuple(f for f in schema.fields if f.name not in moved))
            value = type(struct)(schema, {f.name: struct.get(f.name) for f in schema.fields})
        return self.side.updated(record, schema, value).replace(headers=(*record.headers, *added))


CLASSES = (
    kafka_transform("InsertHeader", InsertHeaderKeys, InsertHeader,
                   "adds a header with a literal value"),
    kafka_transform("DropHeaders", DropHeadersKeys, DropHeaders,
                   "removes the headers of the given names"),
    kafka_transform("HeaderFrom", HeaderFromKeys, HeaderFrom,
                   "copies or moves fields of the key or value into headers", sides=True),
)
