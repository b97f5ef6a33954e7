"""Protobuf schemas and messages <-> Connect's data model, as Confluent's ProtobufData maps them.

A message is a STRUCT named by its full name, every field optional (proto3), repeated fields ARRAY, map
fields MAP, enums STRING (the value's name), uint32 and the 64-bit integers INT64, google.protobuf.Timestamp,
google.type.Date and google.type.TimeOfDay Connect's Timestamp, Date and Time, and the wrapper types
(google.protobuf.StringValue, ...) their optional primitive. Not mapped: oneof as a union struct (its
members are plain optional fields) and confluent.type.Decimal (a STRUCT of its own fields).

A registered schema is either a base64 FileDescriptorProto (what confluent-kafka's Python serializer
registers) or .proto text (what the Java serializers register); text is compiled by grpcio-tools' protoc.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import DATE, TIME, TIMESTAMP, Field, Schema, Struct

_FD = FieldDescriptor
_SCALARS = {
    _FD.TYPE_INT32: "INT32", _FD.TYPE_SINT32: "INT32", _FD.TYPE_SFIXED32: "INT32",
    _FD.TYPE_UINT32: "INT64", _FD.TYPE_FIXED32: "INT64",
    _FD.TYPE_INT64: "INT64", _FD.TYPE_SINT64: "INT64", _FD.TYPE_SFIXED64: "INT64", _FD.TYPE_UINT64: "INT64",
    _FD.TYPE_FIXED64: "INT64", _FD.TYPE_FLOAT: "FLOAT32", _FD.TYPE_DOUBLE: "FLOAT64", _FD.TYPE_BOOL: "BOOLEAN",
    _FD.TYPE_STRING: "STRING", _FD.TYPE_BYTES: "BYTES", _FD.TYPE_ENUM: "STRING",
}
_WRAPPERS = {f"google.protobuf.{name}Value": kind for name, kind in (
    ("Double", "FLOAT64"), ("Float", "FLOAT32"), ("Int64", "INT64"), ("UInt64", "INT64"), ("Int32", "INT32"),
    ("UInt32", "INT64"), ("Bool", "BOOLEAN"), ("String", "STRING"), ("Bytes", "BYTES"))}
_LOGICAL_MESSAGES = {"google.protobuf.Timestamp": ("INT64", TIMESTAMP), "google.type.Date": ("INT32", DATE),
                     "google.type.TimeOfDay": ("INT32", TIME)}
_MAX_DEPTH = 32


@dataclass(frozen=True)
class ProtobufSchema:
    """A registered Protobuf schema's file, its messages by index path, and the Connect schema of each."""

    pool: Any
    file_name: str
    text: str

    def message(self, indexes: list[int]) -> Descriptor:
        file = self.pool.FindFileByName(self.file_name)
        try:
            descriptor = file.message_types_by_name[list(file.message_types_by_name)[indexes[0]]]
            for index in indexes[1:]:
                descriptor = descriptor.nested_types[index]
        except (IndexError, KeyError):
            raise ConversionError(f"message indexes {indexes} name no message of {self.file_name}") from None
        return descriptor


def new_pool():
    from confluent_kafka.schema_registry.common.protobuf import _init_pool

    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)  # the well-known, google.type and confluent files a schema may import
    return pool


def parse(schema_str: str, name: str, references: list[tuple[str, str]]) -> ProtobufSchema:
    """`references`: (import name, schema text) of each referenced file, already in dependency order."""
    pool = new_pool()
    for ref_name, ref_text in references:
        _add_file(pool, ref_name, ref_text, references)
    file_name = _add_file(pool, name, schema_str, references)
    return ProtobufSchema(pool, file_name, schema_str)


def _add_file(pool, name: str, text: str, references: list[tuple[str, str]]) -> str:
    proto = _serialized_form(text)
    if proto is None:
        proto = compile_proto_text(name, text, references)
    proto.name = name
    try:
        pool.FindFileByName(name)
        return name
    except KeyError:
        pass
    try:
        pool.Add(proto)
    except Exception as exc:  # TypeError / descriptor errors for conflicting or broken files
        raise ConversionError(f"the Protobuf schema does not load: {exc}") from exc
    return name


def _serialized_form(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    try:
        raw = base64.b64decode(text, validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return proto if proto.message_type or proto.enum_type else None


def compile_proto_text(name: str, text: str,
                       references: list[tuple[str, str]]) -> descriptor_pb2.FileDescriptorProto:
    """protoc (grpcio-tools) on .proto text: no pure-Python parser of the language is kept up as well."""
    import grpc_tools
    from grpc_tools import protoc

    file_name = name if name.endswith(".proto") else f"{name}.proto"
    with tempfile.TemporaryDirectory() as tmp:
        sources = Path(tmp) / "src"
        for ref_name, ref_text in [*references, (file_name, text)]:
            path = sources / ref_name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ref_text)
        out = Path(tmp) / "set.pb"
        # Imports of google/protobuf/* come with grpcio-tools, google/type/* with googleapis-common-protos.
        includes = [sources, Path(grpc_tools.__file__).parent / "_proto", Path(descriptor_pb2.__file__).parents[2]]
        args = ["protoc", *(f"-I{p}" for p in includes), f"--descriptor_set_out={out}", str(sources / file_name)]
        if protoc.main(args) != 0 or not out.exists():
            raise ConversionError(f"the Protobuf schema text of {name} does not compile")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[-1]


# --- Protobuf -> Connect -----------------------------------------------------------------------------
def connect_schema(descriptor: Descriptor, depth: int = 0) -> Schema:
    if depth > _MAX_DEPTH:
        raise ConversionError(f"{descriptor.full_name} nests deeper than {_MAX_DEPTH} levels (recursive?)")
    fields = tuple(Field(f.name, _field_schema(f, depth)) for f in descriptor.fields)
    return Schema("STRUCT", False, descriptor.full_name, fields=fields)


def _field_schema(f: FieldDescriptor, depth: int) -> Schema:
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return Schema("MAP", True, key_schema=_single_schema(key, depth, False),
                      value_schema=_single_schema(value, depth, False))
    if f.label == _FD.LABEL_REPEATED:
        return Schema("ARRAY", True, value_schema=_single_schema(f, depth, False))
    return _single_schema(f, depth, True)


def _single_schema(f: FieldDescriptor, depth: int, optional: bool) -> Schema:
    if f.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
        name = f.message_type.full_name
        if name in _LOGICAL_MESSAGES:
            kind, logical = _LOGICAL_MESSAGES[name]
            return Schema(kind, optional, logical)
        if name in _WRAPPERS:
            return Schema(_WRAPPERS[name], True)
        inner = connect_schema(f.message_type, depth + 1)
        return Schema("STRUCT", optional, inner.name, fields=inner.fields)
    return Schema(_SCALARS[f.type], optional)


def decode(schema: ProtobufSchema, indexes: list[int], payload: memoryview,
           cache: dict) -> tuple[Schema, Any]:
    """(Connect schema, value) of one message; `cache` keeps each message's class and Connect schema."""
    key = tuple(indexes)
    if key not in cache:
        descriptor = schema.message(indexes)
        cache[key] = (GetMessageClass(descriptor), connect_schema(descriptor))
    message_class, connect = cache[key]
    try:
        message = message_class.FromString(bytes(payload))
    except DecodeError as exc:
        raise ConversionError(f"the bytes are not a {message_class.DESCRIPTOR.full_name}: {exc}") from exc
    return connect, struct_value(connect, message)


def struct_value(schema: Schema, message: Message) -> Struct:
    """A message as a Connect STRUCT of the schema connect_schema() gave for its type."""
    values = {}
    for field_schema, f in zip(schema.fields, message.DESCRIPTOR.fields):
        values[f.name] = _field_value(field_schema.schema, f, message)
    return Struct(schema, values)


def _field_value(schema: Schema, f: FieldDescriptor, message: Message) -> Any:
    value = getattr(message, f.name)
    if schema.type == "MAP":
        return {k: _single_value(schema.value_schema, f.message_type.fields_by_name["value"], v)
                for k, v in value.items()}
    if schema.type == "ARRAY":
        return [_single_value(schema.value_schema, f, v) for v in value]
    if f.has_presence and not message.HasField(f.name):
        return None
    return _single_value(schema, f, value)


def _single_value(schema: Schema, f: FieldDescriptor, value: Any) -> Any:
    if f.type == _FD.TYPE_ENUM:
        enum_value = f.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value else str(value)
    if f.type != _FD.TYPE_MESSAGE:
        return value
    name = f.message_type.full_name
    if name == "google.protobuf.Timestamp":
        return dt.datetime.fromtimestamp(value.seconds, dt.timezone.utc) + dt.timedelta(
            milliseconds=value.nanos // 1_000_000)
    if name == "google.type.Date":
        return dt.date(value.year, value.month, value.day)
    if name == "google.type.TimeOfDay":
        return dt.time(value.hours, value.minutes, value.seconds, value.nanos // 1000 // 1000 * 1000)
    if name in _WRAPPERS:
        return value.value
    return struct_value(schema, value)


# --- Connect -> Protobuf (the sources) ---------------------------------------------------------------
_TO_PROTO = {"INT8": _FD.TYPE_INT32, "INT16": _FD.TYPE_INT32, "INT32": _FD.TYPE_INT32, "INT64": _FD.TYPE_INT64,
             "FLOAT32": _FD.TYPE_FLOAT, "FLOAT64": _FD.TYPE_DOUBLE, "BOOLEAN": _FD.TYPE_BOOL,
             "STRING": _FD.TYPE_STRING, "BYTES": _FD.TYPE_BYTES}
_LOGICAL_IMPORTS = {TIMESTAMP: ("google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
                    DATE: ("google.type.Date", "google/type/date.proto"),
                    TIME: ("google.type.TimeOfDay", "google/type/timeofday.proto")}
WRAPPED_FIELD = "value"


@dataclass(frozen=True)
class ProtobufWriter:
    """A file made for a Connect schema: what is registered and how values become its top message."""

    text: str  # base64 FileDescriptorProto
    record_name: str
    message_class: Any
    connect: Schema
    wrapped: bool  # a non-STRUCT value sits in the one field of a wrapper message


def from_connect_schema(schema: Schema) -> ProtobufWriter:
    from connectors.kafka_connect.data import DECIMAL

    wrapped = schema.type != "STRUCT"
    top = Schema("STRUCT", False, None, fields=(Field(WRAPPED_FIELD, schema),)) if wrapped else schema
    package, _, name = (top.name or "").rpartition(".")
    name = name or "ConnectDefault1"
    file = descriptor_pb2.FileDescriptorProto(name=f"{name}.proto", syntax="proto3", package=package or "")
    imports: set[str] = set()

    def message(struct: Schema, out: descriptor_pb2.DescriptorProto) -> None:
        for number, f in enumerate(struct.fields, start=1):
            field = out.field.add(name=f.name, number=number, label=_FD.LABEL_OPTIONAL)
            s = f.schema
            if s.type == "ARRAY":
                field.label = _FD.LABEL_REPEATED
                s = s.value_schema
                if s.type in ("ARRAY", "MAP"):
                    raise ConversionError(f"field {f.name!r}: Protobuf has no array of {s.type}")
            if s.type == "MAP":
                entry = out.nested_type.add(name=f"{f.name.title().replace('_', '')}Entry")
                entry.options.map_entry = True
                message(Schema("STRUCT", fields=(Field("key", s.key_schema), Field("value", s.value_schema))), entry)
                field.label, field.type, field.type_name = _FD.LABEL_REPEATED, _FD.TYPE_MESSAGE, entry.name
                continue
            if s.name == DECIMAL:
                raise ConversionError(f"field {f.name!r}: Decimal to Protobuf is not supported here")
            if s.name in _LOGICAL_IMPORTS:
                type_name, path = _LOGICAL_IMPORTS[s.name]
                field.type, field.type_name = _FD.TYPE_MESSAGE, f".{type_name}"
                imports.add(path)
            elif s.type == "STRUCT":
                nested = out.nested_type.add(name=(s.name or f"{f.name}_struct").rpartition(".")[2])
                message(s, nested)
                field.type, field.type_name = _FD.TYPE_MESSAGE, nested.name
            else:
                field.type = _TO_PROTO[s.type]
                if s.optional and field.label != _FD.LABEL_REPEATED:
                    field.proto3_optional = True
                    oneof = len(out.oneof_decl)
                    out.oneof_decl.add(name=f"_{f.name}")
                    field.oneof_index = oneof

    message(top, file.message_type.add(name=name))
    file.dependency.extend(sorted(imports))
    pool = new_pool()
    descriptor = pool.Add(file).message_types_by_name[name]
    text = base64.b64encode(file.SerializeToString()).decode("ascii")
    return ProtobufWriter(text, descriptor.full_name, GetMessageClass(descriptor), schema, wrapped)


def writer_for(schema: ProtobufSchema) -> ProtobufWriter:
    """A writer of the first message of a registered schema."""
    descriptor = schema.message([0])
    return ProtobufWriter(schema.text, descriptor.full_name, GetMessageClass(descriptor), connect_schema(descriptor),
                          wrapped=False)


def encode(writer: ProtobufWriter, value: Any) -> bytes:
    message = writer.message_class()
    if writer.wrapped:
        _set(message, WRAPPED_FIELD, writer.connect, value)
    else:
        fill(message, writer.connect, value)
    return message.SerializeToString()


def fill(message: Message, schema: Schema, value: Struct) -> None:
    """Set a message's fields from a Connect STRUCT, field by field name."""
    for f in schema.fields:
        _set(message, f.name, f.schema, value.get(f.name))


def _set(message: Message, name: str, schema: Schema, value: Any) -> None:
    if value is None:
        return
    if schema.type == "ARRAY":
        target = getattr(message, name)
        for item in value:
            if schema.value_schema.type == "STRUCT":
                fill(target.add(), schema.value_schema, item)
            else:
                target.append(_scalar(schema.value_schema, item))
        return
    if schema.type == "MAP":
        target = getattr(message, name)
        for k, v in value.items():
            if schema.value_schema.type == "STRUCT":
                fill(target[k], schema.value_schema, v)
            else:
                target[k] = _scalar(schema.value_schema, v)
        return
    if schema.name == TIMESTAMP:
        getattr(message, name).FromDatetime(value)
    elif schema.name == DATE:
        target = getattr(message, name)
        target.year, target.month, target.day = value.year, value.month, value.day
    elif schema.name == TIME:
        target = getattr(message, name)
        target.hours, target.minutes, target.seconds = value.hour, value.minute, value.second
        target.nanos = value.microsecond * 1000
    elif schema.type == "STRUCT":
        fill(getattr(message, name), schema, value)
    else:
        setattr(message, name, _scalar(schema, value))


def _scalar(schema: Schema, value: Any) -> Any:
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else value

