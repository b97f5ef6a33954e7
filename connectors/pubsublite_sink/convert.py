"""Kafka record -> Pub/Sub Lite message, rule for rule as the reference PubSubLiteSinkTask.

Key and value become bytes by their Connect schema (Schemas.encodeToBytes in the reference):
integers as decimal text, floats as Java's Double.toString text, booleans as true/false, strings as
UTF-8, bytes unchanged, and ARRAY/MAP/STRUCT as a serialized google.protobuf.Value. Headers become
attributes with every value kept; the Kafka coordinates and timestamp type become attributes too.

Better than the reference: a schemaless value (a JsonConverter with schemas.enable=false, say) is
encoded by its own type instead of failing a cast to String.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from google.cloud.pubsublite_v1 import types
from google.protobuf import struct_pb2

from connectors.errors import RecordError
from connectors.kafka.record import KafkaRecord
from connectors.kafka_connect.data import Schema, is_logical, schemaless_type, to_physical
from connectors.kafka_connect.java_text import java_double_to_string
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.transforms.conversion import SinkConversion

KAFKA_TOPIC_ATTRIBUTE = "x-goog-pubsublite-source-kafka-topic"
KAFKA_PARTITION_ATTRIBUTE = "x-goog-pubsublite-source-kafka-partition"
KAFKA_OFFSET_ATTRIBUTE = "x-goog-pubsublite-source-kafka-offset"
KAFKA_EVENT_TIME_TYPE_ATTRIBUTE = "x-goog-pubsublite-source-kafka-event-time-type"
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
# Pub/Sub Lite's limit for one message: data, key and attributes together.
MAX_MESSAGE_BYTES = 3_500_000

_INTEGER = ("INT8", "INT16", "INT32", "INT64")
_FLOAT = ("FLOAT32", "FLOAT64")
PubSubMessagePb = types.PubSubMessage.pb()


def _as_float64(schema_type: str, value: float) -> float:
    # Java widens a float to double before Double.toString: 0.1f prints as 0.10000000149011612.
    return struct.unpack(">f", struct.pack(">f", value))[0] if schema_type == "FLOAT32" else float(value)


def _type_of(schema: Schema | None, value: Any) -> str:
    """The Connect type a value has: its schema's, or for schemaless values the one its Python type implies (any
    other is written as its text)."""
    if schema is not None:
        return schema.type
    return schemaless_type(value) or "STRING"


def encode_to_bytes(schema: Schema | None, value: Any) -> bytes:
    if value is None:
        return b""
    if is_logical(schema):
        value = to_physical(schema, value)  # a logical value is encoded as Connect's own form of it
    kind = _type_of(schema, value)
    if kind in _INTEGER:
        return str(int(value)).encode()
    if kind in _FLOAT:
        return java_double_to_string(_as_float64(kind, value)).encode()
    if kind == "BOOLEAN":
        return b"true" if value else b"false"
    if kind == "STRING":
        return str(value).encode("utf-8")
    if kind == "BYTES":
        return bytes(value)
    # deterministic: map entries in key order, so equal values give equal bytes
    return to_protobuf_value(schema, value).SerializeToString(deterministic=True)


def _map_key(schema: Schema | None, key: Any) -> str:
    kind = _type_of(schema, key)
    if kind in ("ARRAY", "MAP", "STRUCT"):
        raise RecordError(f"a map key of type {kind} cannot become a protobuf Value key")
    if kind == "BYTES":
        return base64.b64encode(bytes(key)).decode()
    if kind in _INTEGER:
        return str(int(key))
    if kind in _FLOAT:
        return java_double_to_string(_as_float64(kind, key))
    if kind == "BOOLEAN":
        return "true" if key else "false"
    return str(key)


def to_protobuf_value(schema: Schema | None, value: Any) -> struct_pb2.Value:
    """The reference's toCanonicalValue: numbers as double, bytes as base64 strings, keys stringified."""
    out = struct_pb2.Value()
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
        return out
    if is_logical(schema):
        value = to_physical(schema, value)
    kind = _type_of(schema, value)
    if kind in _INTEGER or kind in _FLOAT:
        out.number_value = _as_float64(kind, value)
    elif kind == "BOOLEAN":
        out.bool_value = bool(value)
    elif kind == "STRING":
        out.string_value = str(value)
    elif kind == "BYTES":
        out.string_value = base64.b64encode(bytes(value)).decode()
    elif kind == "ARRAY":
        element = schema.value_schema if schema else None
        out.list_value.values.extend(to_protobuf_value(element, v) for v in value)
    elif kind == "MAP":
        key_schema = schema.key_schema if schema else None
        value_schema = schema.value_schema if schema else None
        out.struct_value.SetInParent()
        for k, v in value.items():
            out.struct_value.fields[_map_key(key_schema, k)].CopyFrom(to_protobuf_value(value_schema, v))
    else:  # STRUCT
        out.struct_value.SetInParent()
        for f in value.schema.fields:
            out.struct_value.fields[f.name].CopyFrom(to_protobuf_value(f.schema, value.get(f.name)))
    return out


class PubSubLiteSinkConverter:
    """Turns raw Kafka records into Lite messages with the bridge's converters."""

    def __init__(self, config: PubSubLiteSinkConfig):
        self.conversion = SinkConversion(config)
        self.key_converter, self.value_converter = self.conversion.key_converter, self.conversion.value_converter

    def convert(self, record: KafkaRecord):
        """A raw google.cloud.pubsublite.v1.PubSubMessage for the record, or None when a transform dropped it."""
        converted = self.conversion.convert(record)
        if converted is None:
            return None
        connect, headers = converted
        topic, timestamp = connect.topic, connect.timestamp
        key_schema, key, value_schema, value = connect.key_schema, connect.key, connect.value_schema, connect.value
        message = PubSubMessagePb(key=encode_to_bytes(key_schema, key), data=encode_to_bytes(value_schema, value))
        for header_key, header_value in headers:
            # Header values arrive as bytes (no header converter runs), so they pass unchanged.
            message.attributes[header_key].values.append(header_value or b"")
        message.attributes[KAFKA_TOPIC_ATTRIBUTE].values.append(topic.encode())
        message.attributes[KAFKA_PARTITION_ATTRIBUTE].values.append(str(record.partition).encode())
        message.attributes[KAFKA_OFFSET_ATTRIBUTE].values.append(str(record.offset).encode())
        if timestamp is not None:
            message.attributes[KAFKA_EVENT_TIME_TYPE_ATTRIBUTE].values.append(
                TIMESTAMP_TYPES.get(record.timestamp_type, "CreateTime").encode())  # a transform's stamp on none
            message.event_time.FromMilliseconds(timestamp)
        size = message.ByteSize()
        if size > MAX_MESSAGE_BYTES:
            raise RecordError(f"message is {size} bytes; Pub/Sub Lite allows {MAX_MESSAGE_BYTES}")
        return message
