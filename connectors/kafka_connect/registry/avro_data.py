"""Avro schemas and values <-> Connect's data model, as Confluent's AvroData maps them.

Records are STRUCTs named by their full name, ["null", X] unions optional X, other unions a STRUCT named
io.confluent.connect.avro.Union with one optional field per branch, enums STRING (named, the symbols as
parameters), fixed BYTES, maps with STRING keys MAP, the logical types decimal/date/time-millis/timestamp-millis
Connect's own logical types (version 1).
fastavro does the byte-level reading and writing (its C reader is faster than anything written here).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import (
    DATE, DECIMAL, LOGICAL_TYPES, TIME, TIMESTAMP, Field, Schema, Struct, decimal_schema,
)

UNION = "io.confluent.connect.avro.Union"
ENUM = "io.confluent.connect.avro.Enum"
CONNECT_NAMESPACE = "io.confluent.connect.avro"
_PRIMITIVES = {"boolean": "BOOLEAN", "int": "INT32", "long": "INT64", "float": "FLOAT32", "double": "FLOAT64",
               "bytes": "BYTES", "string": "STRING"}
_CONNECT_TYPE_HINTS = {"int8": "INT8", "int16": "INT16"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_BUILDING = Schema("STRUCT", name="(a record whose fields are being read)")


@dataclass(frozen=True)
class AvroSchema:
    """A registered Avro schema: fastavro's parsed form and the Connect schema it maps to."""

    parsed: Any
    connect: Schema
    record_name: str | None
    text: str  # as registered
    # fastavro's record dict is already the Connect value's field map: no nested record, union struct or
    # logical type that Connect keeps as a number (so decoding skips the per-field walk).
    flat: bool = False


def parse(schema_str: str) -> AvroSchema:
    try:
        doc = json.loads(schema_str)
        parsed = parse_schema(doc)
    except Exception as exc:
        raise ConversionError(f"not a valid Avro schema: {exc}") from exc
    record_name = None
    if isinstance(doc, dict) and doc.get("type") == "record":
        record_name = _full_name(doc["name"], doc.get("namespace"))
    connect = to_connect_schema(doc, {}, None, optional=False)
    flat = connect.type == "STRUCT" and all(_plain(f.schema) for f in connect.fields) and not any(
        f'"{kind}"' in schema_str for kind in _KEPT_AS_NUMBERS)
    return AvroSchema(parsed, connect, record_name, schema_str, flat)


_KEPT_AS_NUMBERS = ("timestamp-micros", "time-micros", "local-timestamp-millis", "local-timestamp-micros", "uuid")


def _plain(schema: Schema) -> bool:
    if schema.type == "STRUCT":
        return False
    if schema.type in ("ARRAY", "MAP"):
        return _plain(schema.value_schema)
    return True


def to_connect_schema(avro: Any, named: dict[str, Schema], namespace: str | None, optional: bool) -> Schema:
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return Schema(_PRIMITIVES[avro], optional)
        full = _full_name(avro, namespace)
        found = named.get(full) or named.get(avro)
        if found is None:
            raise ConversionError(f"Avro schema refers to unknown type {avro!r}")
        if found is _BUILDING:
            raise ConversionError(f"Avro record {full} refers to itself; Connect schemas cannot be recursive")
        return replace(found, optional=optional)
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        nullable = len(branches) < len(avro)
        if len(branches) == 1:
            return to_connect_schema(branches[0], named, namespace, optional or nullable)
        fields = tuple(Field(_branch_name(b), to_connect_schema(b, named, namespace, True)) for b in branches)
        return Schema("STRUCT", optional or nullable, UNION, fields=fields)
    kind = avro.get("type")
    logical = avro.get("logicalType")
    # Connect's logical schemas are version 1; a decimal keeps its precision as a parameter, as AvroData does.
    if logical == "decimal" and kind in ("bytes", "fixed"):
        decimal = decimal_schema(int(avro.get("scale", 0)), optional)
        precision = (("connect.decimal.precision", str(avro["precision"])),) if "precision" in avro else ()
        return replace(decimal, version=1, parameters=decimal.parameters + precision)
    if logical == "date" and kind == "int":
        return Schema("INT32", optional, DATE, version=1)
    if logical == "time-millis" and kind == "int":
        return Schema("INT32", optional, TIME, version=1)
    if logical == "timestamp-millis" and kind == "long":
        return Schema("INT64", optional, TIMESTAMP, version=1)
    if kind in _PRIMITIVES:
        connect_type = _CONNECT_TYPE_HINTS.get(avro.get("connect.type"), _PRIMITIVES[kind])
        return Schema(connect_type, optional, avro.get("connect.name") if kind != "bytes" else None)
    if kind == "record":
        ns = avro.get("namespace", namespace)
        full = _full_name(avro["name"], ns)
        named[full] = _BUILDING
        fields = tuple(Field(f["name"], to_connect_schema(f["type"], named, ns, False)) for f in avro["fields"])
        schema = Schema("STRUCT", optional, avro.get("connect.name", full), fields=fields)
        named[full] = schema
        return schema
    if kind == "enum":
        # A STRING named for the enum, its symbols as parameters (AvroData's form, which a writer reads back).
        full = _full_name(avro["name"], avro.get("namespace", namespace))
        symbols = tuple((f"{ENUM}.{symbol}", symbol) for symbol in avro["symbols"])
        return _named(avro, named, namespace, Schema("STRING", optional, full, parameters=((ENUM, full), *symbols)))
    if kind == "fixed":
        return _named(avro, named, namespace, Schema("BYTES", optional))
    if kind == "array":
        return Schema("ARRAY", optional, value_schema=to_connect_schema(avro["items"], named, namespace, False))
    if kind == "map":
        return Schema("MAP", optional, key_schema=Schema("STRING"),
                      value_schema=to_connect_schema(avro["values"], named, namespace, False))
    if isinstance(kind, (dict, list)) or kind in named:
        return to_connect_schema(kind, named, namespace, optional)
    raise ConversionError(f"Avro type {kind!r} has no Connect form")


def _named(avro: dict, named: dict[str, Schema], namespace: str | None, schema: Schema) -> Schema:
    named[_full_name(avro["name"], avro.get("namespace", namespace))] = schema
    return schema


def _full_name(name: str, namespace: str | None) -> str:
    """Avro's full name: a dotted name is full already, else it takes the enclosing namespace."""
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _branch_name(branch: Any) -> str:
    if isinstance(branch, str):
        return branch.rsplit(".", 1)[-1]
    kind = branch.get("type")
    return branch["name"].rsplit(".", 1)[-1] if kind in ("record", "enum", "fixed") else kind


def decode(schema: AvroSchema, payload: memoryview) -> Any:
    try:
        value = schemaless_reader(io.BytesIO(payload), schema.parsed, None)
    except Exception as exc:
        raise ConversionError(f"the bytes do not match their Avro schema: {type(exc).__name__}: {exc}") from exc
    if schema.flat:
        return Struct(schema.connect, value)
    return to_connect_value(schema.connect, value)


def to_connect_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    t = schema.type
    if t == "STRUCT":
        if schema.name == UNION:
            return Struct(schema, {_union_branch(schema, value).name: to_connect_value(
                _union_branch(schema, value).schema, value)})
        return Struct(schema, {f.name: to_connect_value(f.schema, value.get(f.name)) for f in schema.fields})
    if t == "ARRAY":
        return [to_connect_value(schema.value_schema, v) for v in value]
    if t == "MAP":
        return {k: to_connect_value(schema.value_schema, v) for k, v in value.items()}
    if schema.name in LOGICAL_TYPES:
        return value  # fastavro gives Decimal, date, time and aware UTC datetime, Connect's logical values
    if isinstance(value, dt.datetime):  # timestamp-micros and local-timestamp-*: Connect keeps the number
        return (value - _EPOCH) // dt.timedelta(microseconds=1) if value.tzinfo else value
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _union_branch(schema: Schema, value: Any) -> Field:
    python_types = {"BOOLEAN": bool, "INT32": int, "INT64": int, "FLOAT32": float, "FLOAT64": float,
                    "STRING": str, "BYTES": (bytes, bytearray), "ARRAY": list, "MAP": dict, "STRUCT": dict}
    for f in schema.fields:
        if f.schema.type == "STRUCT" and isinstance(value, dict):
            if set(value) <= {g.name for g in f.schema.fields}:
                return f
        elif isinstance(value, python_types[f.schema.type]) and not (
                isinstance(value, bool) and f.schema.type != "BOOLEAN"):
            return f
    raise ConversionError(f"no branch of the Avro union fits a {type(value).__name__}")


# --- Connect -> Avro (the sources) -------------------------------------------------------------------
_TO_AVRO = {"BOOLEAN": "boolean", "INT8": "int", "INT16": "int", "INT32": "int", "INT64": "long",
            "FLOAT32": "float", "FLOAT64": "double", "STRING": "string", "BYTES": "bytes"}
_LOGICAL_TO_AVRO = {DATE: ("int", "date"), TIME: ("int", "time-millis"), TIMESTAMP: ("long", "timestamp-millis")}


def from_connect_schema(schema: Schema, connect_meta_data: bool = True) -> AvroSchema:
    """The Avro schema Confluent's AvroConverter registers for a Connect schema."""
    doc = _to_avro(schema, connect_meta_data, names=[])
    parsed = parse_schema(json.loads(json.dumps(doc)))  # fastavro marks the dicts it parses
    record_name = None
    if isinstance(doc, dict) and doc.get("type") == "record":
        record_name = _full_name(doc["name"], doc.get("namespace"))
    return AvroSchema(parsed, schema, record_name, json.dumps(doc, separators=(",", ":")))


def _to_avro(schema: Schema, meta: bool, names: list[str]) -> Any:
    avro = _to_avro_required(schema, meta, names)
    return ["null", avro] if schema.optional else avro


def _to_avro_required(schema: Schema, meta: bool, names: list[str]) -> Any:
    t = schema.type
    if schema.name == DECIMAL:
        scale = int(schema.parameter("scale") or 0)
        doc = {"type": "bytes", "logicalType": "decimal", "precision": int(
            schema.parameter("connect.decimal.precision") or 64), "scale": scale}
        if meta:
            doc.update({"connect.version": 1, "connect.parameters": dict(schema.parameters), "connect.name": DECIMAL})
        return doc
    if schema.name in _LOGICAL_TO_AVRO:
        kind, logical = _LOGICAL_TO_AVRO[schema.name]
        doc = {"type": kind, "logicalType": logical}
        if meta:
            doc.update({"connect.version": 1, "connect.name": schema.name})
        return doc
    if t in ("INT8", "INT16"):
        return {"type": "int", "connect.type": t.lower()}
    if t in _TO_AVRO:
        return _TO_AVRO[t]
    if t == "ARRAY":
        return {"type": "array", "items": _to_avro(schema.value_schema, meta, names)}
    if t == "MAP":
        if schema.key_schema.type == "STRING" and not schema.key_schema.optional:
            return {"type": "map", "values": _to_avro(schema.value_schema, meta, names)}
        entry = {"type": "record", "name": _unique("MapEntry", names), "namespace": CONNECT_NAMESPACE, "fields": [
            {"name": "key", "type": _to_avro(schema.key_schema, meta, names)},
            {"name": "value", "type": _to_avro(schema.value_schema, meta, names)}]}
        return {"type": "array", "items": entry}
    namespace, _, name = (schema.name or "").rpartition(".")
    if not name:
        namespace, name = CONNECT_NAMESPACE, _unique("ConnectDefault", names)
    doc: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        doc["namespace"] = namespace
    fields = []
    for f in schema.fields:
        field_doc = {"name": f.name, "type": _to_avro(f.schema, meta, names)}
        if f.schema.optional:
            field_doc["default"] = None
        fields.append(field_doc)
    doc["fields"] = fields
    if meta and schema.name:
        doc["connect.name"] = schema.name
    return doc


def _unique(base: str, names: list[str]) -> str:
    name = base if base not in names else f"{base}{len([n for n in names if n.startswith(base)]) + 1}"
    names.append(name)
    return name


def encode(schema: AvroSchema, value: Any) -> bytes:
    out = io.BytesIO()
    try:
        schemaless_writer(out, schema.parsed, to_avro_value(schema.connect, value))
    except Exception as exc:
        raise ConversionError(f"the value does not fit its Avro schema: {type(exc).__name__}: {exc}") from exc
    return out.getvalue()


def to_avro_value(schema: Schema, value: Any) -> Any:
    """A Connect value as fastavro takes it (STRUCT a dict, MAP with other keys a list of entries)."""
    if value is None:
        return None
    t = schema.type
    if t == "STRUCT":
        return {f.name: to_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t == "ARRAY":
        return [to_avro_value(schema.value_schema, v) for v in value]
    if t == "MAP":
        if schema.key_schema.type == "STRING" and not schema.key_schema.optional:
            return {k: to_avro_value(schema.value_schema, v) for k, v in value.items()}
        return [{"key": to_avro_value(schema.key_schema, k), "value": to_avro_value(schema.value_schema, v)}
                for k, v in value.items()]
    return bytes(value) if isinstance(value, bytearray) else value
