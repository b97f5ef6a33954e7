"""Transforms that change the type of a key, a value or its fields: Cast, TimestampConverter."""

from __future__ import annotations

import base64
import datetime as dt
import re
import struct
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from connectors.kafka_connect.data import (
    DATE, TIME, TIMESTAMP, Field as SchemaField, Schema, Struct, schemaless_type,
)
from connectors.kafka_connect.java_text import java_float_to_string, java_string
from connectors.transforms.classes import CommaList, ReplaceNullWithDefault, TransformConfig, kafka_transform
from connectors.transforms.java_forms import simple_date_format, simple_date_parser
from connectors.transforms.record import ConnectRecord, TransformError
from connectors.transforms.sides import Side, require_map, require_struct, struct_schema_like

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DAY_MS = 86_400_000

# --- Cast --------------------------------------------------------------------------------------------------------
_CAST_TO = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING")
_CAST_FROM = _CAST_TO + ("BYTES",)
_WHOLE = ""  # the spec's key for a cast of the whole key or value
_BITS = {"INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64}
_JAVA_INTEGER = re.compile(r"[+-]?\d+")


def _cast_spec(items: tuple[str, ...]) -> dict[str, str]:
    casts = {}
    for item in items:
        parts = item.split(":")
        if len(parts) > 2:
            raise ValueError(f"{item!r} is not field:type or type")
        target = parts[-1].strip().upper()
        if target not in _CAST_TO:
            types = ", ".join(t.lower() for t in _CAST_TO)
            raise ValueError(f"cannot cast to {parts[-1].strip()!r}; the types are {types}")
        casts[_WHOLE if len(parts) == 1 else parts[0].strip()] = target
    if _WHOLE in casts and len(items) > 1:
        raise ValueError("a cast of the whole key or value (a type alone) must be the only item")
    return casts


class CastKeys(TransformConfig):
    spec: CommaList = Field(alias="spec", description=(
        "field:type pairs (a comma list), or one type alone to cast the whole key or value; the types are int8, "
        "int16, int32, int64, float32, float64, boolean and string"))
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("spec")
    @classmethod
    def _valid(cls, spec: tuple[str, ...]) -> tuple[str, ...]:
        if not spec:
            raise ValueError("give at least one cast")
        _cast_spec(spec)
        return spec


def _wrapped(number: int, bits: int) -> int:
    """Java's narrowing of a long: the low bits, signed."""
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >= 1 << (bits - 1) else number


def _java_int(value: float | Decimal, bits: int) -> int:
    """Java's (int) or (long) of a double, then narrowed: NaN is 0, out of range saturates."""
    if isinstance(value, float) and value != value:
        return 0
    wide = 64 if bits == 64 else 32
    limit = 1 << (wide - 1)
    whole = int(value) if abs(value) < limit else (limit - 1 if value > 0 else -limit)
    return _wrapped(whole, bits) if bits < wide else whole


def _logical_millis(schema: Schema, value: Any) -> Any:
    """A Date, Time or Timestamp as the number Connect stores (days or milliseconds); other values as they are."""
    if schema.name == DATE and isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    if schema.name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if schema.name == TIMESTAMP and isinstance(value, dt.datetime):
        return (value - _EPOCH) // dt.timedelta(milliseconds=1)
    return value


def _millis_of(value: dt.date | dt.time | dt.datetime) -> int:
    if isinstance(value, dt.datetime):
        return (value - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days * _DAY_MS
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _date_text(millis: int) -> str:
    """Values.dateFormatFor: a time of day, a date or a timestamp by what the milliseconds hold."""
    if millis < _DAY_MS:
        return simple_date_format("HH:mm:ss.SSS'Z'")(millis)
    if millis % _DAY_MS == 0:
        return simple_date_format("yyyy-MM-dd")(millis)
    return simple_date_format("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")(millis)


def cast_value(schema: Schema | None, value: Any, target: str) -> Any:
    if value is None:
        return None
    source = schema.type if schema is not None else schemaless_type(value)
    if source not in _CAST_FROM:
        raise TransformError(f"cannot cast from {source or type(value).__name__}")
    if schema is not None and schema.name and target != "STRING":
        value = _logical_millis(schema, value)
    if target == "STRING":
        if isinstance(value, (dt.date, dt.time)):
            return _date_text(_millis_of(value))
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value)).decode("ascii")
        return java_string(value, schema)
    if isinstance(value, (bytes, bytearray, dt.date, dt.time)):
        raise TransformError(f"cannot cast a {type(value).__name__} to {target}")
    if target == "BOOLEAN":
        if isinstance(value, str):
            return value.lower() == "true"
        return _java_int(value, 64) != 0 if not isinstance(value, bool) else value
    if isinstance(value, bool):
        value = int(value)
    if target in _BITS:
        bits = _BITS[target]
        if isinstance(value, str):
            if not _JAVA_INTEGER.fullmatch(value) or not -(1 << (bits - 1)) <= int(value) < 1 << (bits - 1):
                raise TransformError(f"value ({value}) is not a {target}")
            return int(value)
        if isinstance(value, int):
            return _wrapped(value, bits)
        return _java_int(value, bits)
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except ValueError:
        raise TransformError(f"value ({value}) is not a number") from None
    if target == "FLOAT32":
        # The double closest to the float's shortest digits: what a Java Float reads as, with or without a schema.
        return float(java_float_to_string(struct.unpack(">f", struct.pack(">f", number))[0]))
    return number


class Cast:
    def __init__(self, keys: CastKeys, side: Side):
        self.side = side
        self.casts = _cast_spec(keys.spec)
        self._schemas: dict[Schema, Schema] = {}

    def _updated_schema(self, schema: Schema) -> Schema:
        if schema not in self._schemas:
            whole = self.casts.get(_WHOLE)
            if whole is not None:
                updated = Schema(whole, schema.optional, schema.name, parameters=schema.parameters,
                                 version=schema.version, doc=schema.doc)
            else:
                fields = tuple(SchemaField(f.name, Schema(self.casts[f.name], f.schema.optional))
                               if f.name in self.casts else f for f in schema.fields)
                updated = struct_schema_like(schema, fields)
            self._schemas[schema] = updated
        return self._schemas[schema]

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        if value is None:
            return record
        whole = self.casts.get(_WHOLE)
        if schema is None:
            if whole is not None:
                return self.side.updated(record, None, cast_value(None, value, whole))
            updated = dict(require_map(value, "cast types"))
            for name, target in self.casts.items():
                updated[name] = cast_value(None, value.get(name), target)
            return self.side.updated(record, None, updated)
        new_schema = self._updated_schema(schema)
        if whole is not None:
            return self.side.updated(record, new_schema, cast_value(schema, value, whole))
        struct_value = require_struct(value, "cast types")
        values = {f.name: cast_value(f.schema, struct_value.get(f.name), self.casts[f.name]) if f.name in self.casts
                  else struct_value.get(f.name) for f in struct_value.schema.fields}
        return self.side.updated(record, new_schema, Struct(new_schema, values))


# --- TimestampConverter ------------------------------------------------------------------------------------------
TargetType = Literal["string", "unix", "Date", "Time", "Timestamp"]
_PRECISION_MS = {"seconds": 1000, "milliseconds": 1, "microseconds": 1 / 1000, "nanoseconds": 1 / 1_000_000}


class TimestampConverterKeys(TransformConfig):
    field: str = Field("", alias="field", description="the field holding the timestamp (empty: the whole key or value)")
    target_type: TargetType = Field(alias="target.type",
                                    description="what it becomes: string, unix, Date, Time or Timestamp")
    format: str = Field("", alias="format",
                        description="a java.text.SimpleDateFormat pattern (UTC) for string timestamps, read or written")
    unix_precision: Literal["seconds", "milliseconds", "microseconds", "nanoseconds"] = Field(
        "milliseconds", alias="unix.precision", description="the unit of a unix timestamp, read or written")
    replace_null_with_default: ReplaceNullWithDefault = True

    @model_validator(mode="after")
    def _format_for_strings(self):
        if self.target_type == "string" and not self.format.strip():
            raise ValueError("target.type=string needs format")
        if self.format.strip():
            simple_date_format(self.format)
            simple_date_parser(self.format)
        return self


def _logical(name: str, type_name: str, optional: bool) -> Schema:
    return Schema(type_name, optional, name, version=1)


_TARGET_SCHEMAS = {"string": lambda o: Schema("STRING", o), "unix": lambda o: Schema("INT64", o),
                   "Date": lambda o: _logical(DATE, "INT32", o), "Time": lambda o: _logical(TIME, "INT32", o),
                   "Timestamp": lambda o: _logical(TIMESTAMP, "INT64", o)}


class TimestampConverter:
    def __init__(self, keys: TimestampConverterKeys, side: Side):
        self.side = side
        self.field = keys.field
        self.target = keys.target_type
        self.format = simple_date_format(keys.format) if keys.format.strip() else None
        self.parse = simple_date_parser(keys.format) if keys.format.strip() else None
        self.unit_ms = _PRECISION_MS[keys.unix_precision]
        self._schemas: dict[Schema, Schema] = {}

    def _source_type(self, schema: Schema) -> str:
        kinds = {TIMESTAMP: "Timestamp", DATE: "Date", TIME: "Time"}
        if schema.name in kinds:
            return kinds[schema.name]
        if schema.type in ("STRING", "INT64"):
            return "string" if schema.type == "STRING" else "unix"
        raise TransformError(f"a {schema.type} schema is not a timestamp")

    def _to_millis(self, value: Any, source: str) -> int:
        if source == "string":
            if not isinstance(value, str):
                raise TransformError(f"a string timestamp must be a string, found {type(value).__name__}")
            if self.parse is None:
                raise TransformError("a string timestamp needs format")
            try:
                return self.parse(value)
            except ValueError as exc:
                raise TransformError(f"could not parse the timestamp: {exc}") from None
        if source == "unix":
            if not isinstance(value, int) or isinstance(value, bool):
                raise TransformError(f"a unix timestamp must be a whole number, found {type(value).__name__}")
            if self.unit_ms >= 1:
                return value * int(self.unit_ms)
            divisor = round(1 / self.unit_ms)
            return -(-value // divisor) if value < 0 else value // divisor  # Java's TimeUnit truncates toward zero
        if not isinstance(value, (dt.date, dt.time)):
            raise TransformError(f"a {source} must be a date or time, found {type(value).__name__}")
        return _millis_of(value)

    def _from_millis(self, millis: int) -> Any:
        if self.target == "string":
            return self.format(millis)
        if self.target == "unix":
            return millis // int(self.unit_ms) if self.unit_ms >= 1 else millis * round(1 / self.unit_ms)
        at = _EPOCH + dt.timedelta(milliseconds=millis)
        if self.target == "Date":
            return at.date()
        if self.target == "Time":
            return at.time().replace(tzinfo=None)
        return at

    def _convert(self, value: Any, source: str | None) -> Any:
        if value is None:
            return None
        if source is None:
            source = ("Timestamp" if isinstance(value, dt.datetime) else "unix" if isinstance(value, int) and
                      not isinstance(value, bool) else "string" if isinstance(value, str) else None)
            if source is None:
                raise TransformError(f"a {type(value).__name__} is not a timestamp")
        return self._from_millis(self._to_millis(value, source))

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = self.side.schema(record), self.side.value(record)
        if schema is None:
            if value is None or not self.field:
                return self.side.updated(record, None, self._convert(value, None))
            updated = dict(require_map(value, "converting timestamp formats"))
            updated[self.field] = self._convert(value.get(self.field), None)
            return self.side.updated(record, None, updated)
        if not self.field:
            return self.side.updated(record, _TARGET_SCHEMAS[self.target](schema.optional),
                                     self._convert(value, self._source_type(schema)))
        struct_value = None if value is None else require_struct(value, "converting timestamp formats")
        if schema not in self._schemas:
            fields = tuple(SchemaField(f.name, _TARGET_SCHEMAS[self.target](f.schema.optional))
                           if f.name == self.field else f for f in schema.fields)
            self._schemas[schema] = struct_schema_like(schema, fields)
        new_schema = self._schemas[schema]
        if struct_value is None:
            return self.side.updated(record, new_schema, None)
        values = {f.name: self._convert(struct_value.get(f.name), self._source_type(f.schema)) if f.name == self.field
                  else struct_value.get(f.name) for f in struct_value.schema.fields}
        return self.side.updated(record, new_schema, Struct(new_schema, values))


CLASSES = (
    kafka_transform("Cast", CastKeys, Cast,
                   "casts fields, or the whole key or value, to another primitive type", sides=True),
    kafka_transform("TimestampConverter", TimestampConverterKeys, TimestampConverter,
                   "converts a timestamp between text, unix time and Connect's Date, Time and Timestamp", sides=True),
)
