"""Kafka Connect's converters (bytes -> schema and value), named by their Java class names.

Only what a sink needs to read raw Kafka bytes the way a Kafka Connect worker would, plus the
reverse direction for sources. JsonConverter follows org.apache.kafka.connect.json.JsonConverter:
with schemas enabled every message is a {"schema": ..., "payload": ...} envelope.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from connectors.kafka_connect.converter_classes import (
    BYTE_ARRAY_CONVERTER, JSON_CONVERTER, KNOWN_CONVERTERS, REGISTRY_CONVERTERS, STRING_CONVERTER,
)
from connectors.kafka_connect.data import (
    DECIMAL, OPTIONAL_BYTES, OPTIONAL_STRING, Field, Schema, Struct, from_physical, is_logical, to_physical,
)
from connectors.kafka_connect.errors import ConversionError


class Converter(Protocol):
    def to_connect(self, data: bytes | None) -> tuple[Schema | None, Any]: ...

    # topic: the Kafka topic the bytes go to (a registry converter's subject is named after it).
    def from_connect(self, schema: Schema | None, value: Any, topic: str = "") -> bytes | None: ...


class StringConverter:
    def to_connect(self, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return OPTIONAL_STRING, None
        try:
            return OPTIONAL_STRING, data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConversionError(f"StringConverter: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc

    def from_connect(self, schema: Schema | None, value: Any, topic: str = "") -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        from connectors.kafka_connect.java_text import java_string

        return java_string(value, schema).encode("utf-8")


class ByteArrayConverter:
    def to_connect(self, data: bytes | None) -> tuple[Schema | None, Any]:
        return OPTIONAL_BYTES, data

    def from_connect(self, schema: Schema | None, value: Any, topic: str = "") -> bytes | None:
        if value is None or isinstance(value, (bytes, bytearray)):
            return None if value is None else bytes(value)
        raise ConversionError(f"ByteArrayConverter takes bytes, got {type(value).__name__}")


@dataclass(frozen=True)
class JsonConverter:
    schemas_enable: bool = True

    def to_connect(self, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConversionError(f"JsonConverter: not valid JSON ({exc})") from exc
        if not self.schemas_enable:
            return None, doc
        if not (isinstance(doc, dict) and set(doc) == {"schema", "payload"}):
            raise ConversionError(
                'JsonConverter with schemas.enable requires "schema" and "payload" fields and may '
                "not contain additional fields"
            )
        if doc["schema"] is None:
            return None, doc["payload"]
        schema = schema_from_json(doc["schema"])
        return schema, value_from_json(schema, doc["payload"])

    def from_connect(self, schema: Schema | None, value: Any, topic: str = "") -> bytes | None:
        payload = value_to_json(schema, value)
        if self.schemas_enable:
            doc = {"schema": schema_to_json(schema) if schema else None, "payload": payload}
        else:
            doc = payload
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def converter_for(class_name: str, schemas_enable: bool = True, registry=None) -> Converter:
    """`registry`: the RegistrySettings a Schema Registry converter needs (None for the others)."""
    if class_name in REGISTRY_CONVERTERS:
        from connectors.kafka_connect.registry.converters import registry_converter

        if registry is None:
            raise ValueError(f"{class_name} needs schema.registry.url")
        return registry_converter(class_name, registry)
    if class_name == STRING_CONVERTER:
        return StringConverter()
    if class_name == BYTE_ARRAY_CONVERTER:
        return ByteArrayConverter()
    if class_name == JSON_CONVERTER:
        return JsonConverter(schemas_enable)
    raise ValueError(f"unknown converter {class_name!r}; known: {', '.join(KNOWN_CONVERTERS)}")


# --- JsonConverter's schema and payload formats --------------------------------------------------
_JSON_TYPE_NAMES = {
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float": "FLOAT32",
    "double": "FLOAT64", "boolean": "BOOLEAN", "string": "STRING", "bytes": "BYTES",
    "array": "ARRAY", "map": "MAP", "struct": "STRUCT",
}
_CONNECT_TO_JSON_TYPE = {v: k for k, v in _JSON_TYPE_NAMES.items()}


def schema_from_json(doc: Any) -> Schema:
    if not isinstance(doc, dict) or "type" not in doc:
        raise ConversionError(f"JsonConverter: schema must be an object with a type, got {doc!r}")
    type_name = _JSON_TYPE_NAMES.get(doc["type"])
    if type_name is None:
        raise ConversionError(f"JsonConverter: unknown schema type {doc['type']!r}")
    optional = bool(doc.get("optional", False))
    basics = {"name": doc.get("name"), "version": doc.get("version"), "doc": doc.get("doc"),
              "parameters": tuple((str(k), str(v)) for k, v in (doc.get("parameters") or {}).items())}
    if type_name == "STRUCT":
        fields = tuple(Field(f["field"], schema_from_json(f)) for f in doc.get("fields", []))
        return Schema("STRUCT", optional, fields=fields, **basics)
    if type_name == "ARRAY":
        return Schema("ARRAY", optional, value_schema=schema_from_json(doc["items"]), **basics)
    if type_name == "MAP":
        return Schema("MAP", optional, key_schema=schema_from_json(doc["keys"]),
                      value_schema=schema_from_json(doc["values"]), **basics)
    return Schema(type_name, optional, **basics)


def schema_to_json(schema: Schema) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": _CONNECT_TO_JSON_TYPE[schema.type], "optional": schema.optional}
    if schema.name:
        doc["name"] = schema.name
    if schema.version is not None:
        doc["version"] = schema.version
    if schema.doc is not None:
        doc["doc"] = schema.doc
    if schema.parameters:
        doc["parameters"] = dict(schema.parameters)
    if schema.type == "STRUCT":
        doc["fields"] = [{**schema_to_json(f.schema), "field": f.name} for f in schema.fields]
    elif schema.type == "ARRAY":
        doc["items"] = schema_to_json(schema.value_schema)
    elif schema.type == "MAP":
        doc["keys"] = schema_to_json(schema.key_schema)
        doc["values"] = schema_to_json(schema.value_schema)
    return doc


def value_from_json(schema: Schema, payload: Any) -> Any:
    if payload is None:
        return None
    if is_logical(schema):
        if schema.name == DECIMAL and isinstance(payload, (int, float)) and not isinstance(payload, bool):
            return Decimal(str(payload))  # decimal.format=NUMERIC writes the number itself
        return from_physical(schema, _primitive_from_json(schema, payload))
    return _primitive_from_json(schema, payload)


def _primitive_from_json(schema: Schema, payload: Any) -> Any:
    t = schema.type
    try:
        if t in ("INT8", "INT16", "INT32", "INT64"):
            if isinstance(payload, bool) or not isinstance(payload, int):
                raise ConversionError(f"expected an integer for {t}, got {payload!r}")
            return payload
        if t in ("FLOAT32", "FLOAT64"):
            return float(payload)
        if t == "BOOLEAN":
            if not isinstance(payload, bool):
                raise ConversionError(f"expected a boolean, got {payload!r}")
            return payload
        if t == "STRING":
            if not isinstance(payload, str):
                raise ConversionError(f"expected a string, got {payload!r}")
            return payload
        if t == "BYTES":
            return base64.b64decode(payload, validate=True)
        if t == "ARRAY":
            return [value_from_json(schema.value_schema, v) for v in payload]
        if t == "MAP":
            if isinstance(payload, dict):  # string-keyed maps are written as JSON objects
                return {value_from_json(schema.key_schema, k): value_from_json(schema.value_schema, v)
                        for k, v in payload.items()}
            return {value_from_json(schema.key_schema, k): value_from_json(schema.value_schema, v)
                    for k, v in payload}
        if t == "STRUCT":
            return Struct(schema, {f.name: value_from_json(f.schema, payload.get(f.name)) for f in schema.fields})
    except (TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, ConversionError):
            raise
        raise ConversionError(f"JsonConverter: payload does not match its {t} schema: {exc}") from exc
    raise ConversionError(f"JsonConverter: unsupported schema type {t}")


def value_to_json(schema: Schema | None, value: Any) -> Any:
    if value is None:
        return None
    if schema is not None and schema.type == "FLOAT32" and isinstance(value, float):
        # Java writes a float by its shortest digits (1.70000004E12), not those of the double holding it.
        from connectors.kafka_connect.java_text import java_float_to_string

        return float(java_float_to_string(value))
    if is_logical(schema):
        value = to_physical(schema, value)
    if isinstance(value, Struct):
        return {f.name: value_to_json(f.schema, value.get(f.name)) for f in value.schema.fields}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        vs = schema.value_schema if schema else None
        return {str(k): value_to_json(vs, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        vs = schema.value_schema if schema else None
        return [value_to_json(vs, v) for v in value]
    return value
