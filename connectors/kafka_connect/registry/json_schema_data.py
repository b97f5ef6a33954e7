"""JSON Schema documents and JSON values <-> Connect's data model, as Confluent's JsonSchemaData maps them.

An object with properties is a STRUCT (named by its title; properties not in `required` optional), an
object with only additionalProperties a MAP with STRING keys, `integer` INT64 and `number` FLOAT64 unless
`connect.type` narrows them, a string with `connect.type: bytes` BYTES (base64), `oneOf`/`type` lists with
null an optional schema, and a title naming a Connect logical type that logical type.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import (
    DATE, DECIMAL, LOGICAL_TYPES, TIME, TIMESTAMP, Field, Schema, Struct, from_physical, to_physical,
)

_TYPES = {"boolean": "BOOLEAN", "integer": "INT64", "number": "FLOAT64", "string": "STRING", "array": "ARRAY",
          "object": "STRUCT"}
_CONNECT_TYPES = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float32": "FLOAT32",
                  "float64": "FLOAT64", "bytes": "BYTES"}


@dataclass(frozen=True)
class JsonSchema:
    connect: Schema
    record_name: str | None
    text: str


def parse(schema_str: str) -> JsonSchema:
    try:
        doc = json.loads(schema_str)
    except json.JSONDecodeError as exc:
        raise ConversionError(f"not a valid JSON Schema document: {exc}") from exc
    connect = to_connect_schema(doc, doc, optional=False)
    return JsonSchema(connect, doc.get("title") if isinstance(doc, dict) else None, schema_str)


def to_connect_schema(doc: Any, root: dict, optional: bool) -> Schema:
    if doc is True or doc == {}:
        raise ConversionError("a JSON Schema that allows anything has no Connect form")
    if "$ref" in doc:
        ref = doc["$ref"]
        if not ref.startswith("#/"):
            raise ConversionError(f"JSON Schema reference {ref!r} is not local to the document")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        return to_connect_schema(target, root, optional)
    for union_key in ("oneOf", "anyOf"):
        if union_key in doc:
            branches = [b for b in doc[union_key] if b.get("type") != "null"]
            if len(branches) == 1:
                return to_connect_schema(branches[0], root, True)
            raise ConversionError(f"a JSON Schema {union_key} of {len(branches)} non-null branches has no Connect form here")
    kind = doc.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        if len(rest) != 1:
            raise ConversionError(f"JSON Schema type {kind} has no Connect form")
        return to_connect_schema({**doc, "type": rest[0]}, root, True)
    title = doc.get("title")
    hint = doc.get("connect.type")
    params = tuple((str(k), str(v)) for k, v in (doc.get("connect.parameters") or {}).items())
    if title in LOGICAL_TYPES:
        return Schema(LOGICAL_TYPES[title], optional, title, parameters=params)
    if kind not in _TYPES:
        raise ConversionError(f"JSON Schema type {kind!r} has no Connect form")
    if kind == "array":
        return Schema("ARRAY", optional, value_schema=to_connect_schema(doc.get("items", {}), root, False))
    if kind == "object":
        properties = doc.get("properties")
        extra = doc.get("additionalProperties")
        if not properties and isinstance(extra, dict):
            return Schema("MAP", optional, key_schema=Schema("STRING"),
                          value_schema=to_connect_schema(extra, root, False))
        required = set(doc.get("required", []))
        fields = tuple(Field(name, to_connect_schema(sub, root, name not in required))
                       for name, sub in (properties or {}).items())
        return Schema("STRUCT", optional, title, fields=fields)
    return Schema(_CONNECT_TYPES.get(hint, _TYPES[kind]), optional)


def decode(schema: JsonSchema, payload: memoryview) -> Any:
    try:
        doc = json.loads(bytes(payload))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError(f"not valid JSON after the schema id: {exc}") from exc
    return to_connect_value(schema.connect, doc)


def to_connect_value(schema: Schema, value: Any) -> Any:
    if value is None:
        if not schema.optional:
            raise ConversionError(f"a required {schema.type} is null")
        return None
    t = schema.type
    try:
        if schema.name == DECIMAL:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ConversionError(f"expected a decimal number, got {value!r}")
            return Decimal(str(value))
        if schema.name in (DATE, TIME, TIMESTAMP):
            return from_physical(schema, int(value))
        if t == "STRUCT":
            return Struct(schema, {f.name: to_connect_value(f.schema, value.get(f.name)) for f in schema.fields})
        if t == "ARRAY":
            return [to_connect_value(schema.value_schema, v) for v in value]
        if t == "MAP":
            return {k: to_connect_value(schema.value_schema, v) for k, v in value.items()}
        if t == "BYTES":
            return base64.b64decode(value, validate=True)
        if t.startswith("INT") and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConversionError(f"expected an integer for {t}, got {value!r}")
        if t.startswith("FLOAT"):
            return float(value)
        if t == "STRING" and not isinstance(value, str):
            raise ConversionError(f"expected a string, got {value!r}")
        if t == "BOOLEAN" and not isinstance(value, bool):
            raise ConversionError(f"expected a boolean, got {value!r}")
        return value
    except (TypeError, ValueError, AttributeError, InvalidOperation) as exc:
        if isinstance(exc, ConversionError):
            raise
        raise ConversionError(f"the JSON value does not match its {t} schema: {exc}") from exc


# --- Connect -> JSON Schema (the sources) ------------------------------------------------------------
DRAFT = "http://json-schema.org/draft-07/schema#"


def from_connect_schema(schema: Schema) -> JsonSchema:
    doc = {"$schema": DRAFT, **_to_json_schema(schema)}  # a registry tells JSON Schema by its $schema
    return JsonSchema(schema, schema.name if schema.type == "STRUCT" else None,
                      json.dumps(doc, separators=(",", ":")))


def _to_json_schema(schema: Schema) -> dict[str, Any]:
    doc = _required_form(schema)
    return {"oneOf": [{"type": "null"}, doc]} if schema.optional else doc


def _required_form(schema: Schema) -> dict[str, Any]:
    t = schema.type
    if schema.name in LOGICAL_TYPES:
        doc: dict[str, Any] = {"type": "number" if schema.name == DECIMAL else "integer", "title": schema.name,
                               "connect.type": t.lower() if t != "BYTES" else "bytes", "connect.version": 1}
        if schema.parameters:
            doc["connect.parameters"] = dict(schema.parameters)
        return doc
    if t == "STRUCT":
        doc = {"type": "object", "properties": {f.name: _to_json_schema(f.schema) for f in schema.fields},
               "required": [f.name for f in schema.fields if not f.schema.optional], "additionalProperties": False}
        if schema.name:
            doc["title"] = schema.name
        return doc
    if t == "ARRAY":
        return {"type": "array", "items": _to_json_schema(schema.value_schema)}
    if t == "MAP":
        return {"type": "object", "additionalProperties": _to_json_schema(schema.value_schema)}
    if t == "BYTES":
        return {"type": "string", "connect.type": "bytes"}
    if t == "BOOLEAN":
        return {"type": "boolean"}
    if t == "STRING":
        return {"type": "string"}
    if t.startswith("INT"):
        return {"type": "integer", "connect.type": t.lower()}
    return {"type": "number", "connect.type": "float32" if t == "FLOAT32" else "float64"}


def encode(schema: JsonSchema, value: Any) -> bytes:
    return json.dumps(_to_json_value(schema.connect, value), separators=(",", ":")).encode("utf-8")


def _to_json_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.name == DECIMAL:
        return float(value)  # Python's json writes no arbitrary-precision number; doubles keep 15-17 digits
    if schema.name in LOGICAL_TYPES:
        return to_physical(schema, value)
    t = schema.type
    if t == "STRUCT":
        return {f.name: _to_json_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t == "ARRAY":
        return [_to_json_value(schema.value_schema, v) for v in value]
    if t == "MAP":
        return {str(k): _to_json_value(schema.value_schema, v) for k, v in value.items()}
    if t == "BYTES":
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.date, dt.time)):
        raise ConversionError(f"a {type(value).__name__} value needs a logical schema")
    return value
