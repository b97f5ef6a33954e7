"""Kafka record -> Pub/Sub message, rule for rule as the reference CloudPubSubSinkTask, plus its fixes.

Fixes over the reference: never more than 100 attributes; bytes never rendered as a Java object
id (UTF-8 text, else base64 marked by an `<name>.encoding=base64` attribute); attribute and
ordering-key limits checked before publishing, so a bad record is reported, not retried forever.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.errors import RecordError
from connectors.kafka.record import KafkaRecord
from connectors.kafka_connect.bytes_text import BASE64, bytes_to_text
from connectors.kafka_connect.converters import value_to_json
from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import Schema, Struct, is_logical, to_physical
from connectors.kafka_connect.java_text import java_string
from connectors.transforms.conversion import SinkConversion

MAX_ATTRIBUTES = 100
MAX_ATTRIBUTE_KEY_BYTES = 256
MAX_ATTRIBUTE_VALUE_BYTES = 1024
MAX_ORDERING_KEY_BYTES = 1024
MAX_MESSAGE_BYTES = 10_000_000
KEY_ATTRIBUTE = "key"
_SHORT_KEY, _SHORT_VALUE = MAX_ATTRIBUTE_KEY_BYTES // 4, MAX_ATTRIBUTE_VALUE_BYTES // 4  # characters
_PACK = {"INT8": ">b", "INT16": ">h", "INT32": ">i", "INT64": ">q", "FLOAT32": ">f", "FLOAT64": ">d"}


@dataclass
class OutgoingMessage:
    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    ordering_key: str = ""
    headers_dropped: int = 0  # headers.publish: headers that could not become attributes
    topic: str | None = None  # the topic transforms gave the record (a router's), for cps.topic's ${topic}

    def size(self) -> int:
        return len(self.data) + sum(len(k.encode()) + len(v.encode()) for k, v in self.attributes.items())


def encode_data(schema: Schema | None, value: Any) -> bytes:
    """Bytes of a primitive or array value by its schema type (the reference's handleValue)."""
    if value is None:
        return b""
    if schema is None:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        return java_string(value).encode("utf-8")
    if is_logical(schema):
        value = to_physical(schema, value)  # the bytes Connect's own form of the value has
    t = schema.type
    if t in _PACK:
        try:
            return struct.pack(_PACK[t], value)
        except struct.error as exc:
            raise RecordError(f"{t} value {value!r} out of range") from exc
    if t == "BOOLEAN":
        return b"\x01" if value else b"\x00"
    if t == "STRING":
        return value.encode("utf-8")
    if t == "BYTES":
        return bytes(value)
    if t == "ARRAY":
        element = schema.value_schema
        if element is not None and element.type in ("MAP", "STRUCT"):
            raise RecordError(f"an array of {element.type} cannot become message data")
        return b"".join(encode_data(element, v) for v in value)
    raise RecordError(f"a nested {t} cannot become message data")


class _Attributes:
    """Attributes under Pub/Sub's limits; what cannot fit is an error unless it is an optional header."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def put_text(self, key: str, text: str) -> None:
        # Short texts fit whatever their characters (4 UTF-8 bytes at most each): only those need encoding.
        if not (0 < len(key) <= _SHORT_KEY and len(text) <= _SHORT_VALUE and key[:4] != "goog"):
            problem = _attribute_problem(key, text)
            if problem:
                raise RecordError(problem)
        self.values[key] = text

    def put_value(self, key: str, schema: Schema | None, value: Any) -> None:
        if type(value) is str:  # the common case first: a string is its own Java text
            self.put_text(key, value)
        elif isinstance(value, (bytes, bytearray)):
            text, encoding = bytes_to_text(bytes(value))
            self.put_text(key, text)
            if encoding:
                self.put_text(f"{key}.encoding", encoding)
        else:
            self.put_text(key, java_string(value, schema))

    def offer_header(self, key: str, value: bytes | None) -> bool:
        """Headers are copied only when they fit (the reference skips oversized ones the same way);
        False for a header that was dropped."""
        if value is None or len(self.values) >= MAX_ATTRIBUTES:
            return False
        text, encoding = bytes_to_text(value)
        if encoding == BASE64:
            return False  # a binary header has no faithful string form within an attribute
        if _attribute_problem(key, text) is None and key not in self.values:
            self.values[key] = text
            return True
        return False


def _attribute_problem(key: str, text: str) -> str | None:
    if not key:
        return "an attribute key is empty"
    if len(key.encode("utf-8")) > MAX_ATTRIBUTE_KEY_BYTES:
        return f"attribute key {key[:40]!r}... is over {MAX_ATTRIBUTE_KEY_BYTES} bytes"
    if key.startswith("goog"):
        return f"attribute key {key!r} starts with the reserved prefix 'goog'"
    if len(text.encode("utf-8")) > MAX_ATTRIBUTE_VALUE_BYTES:
        return f"attribute {key!r} value is over {MAX_ATTRIBUTE_VALUE_BYTES} bytes"
    return None


class CloudPubSubSinkConverter:
    """Turns raw Kafka records into Pub/Sub messages with the bridge's converters and keys."""

    def __init__(self, config: CloudPubSubSinkConfig, topic_schemas=None):
        """`topic_schemas`: each Kafka topic's TopicCodec (a PerTarget), for messageFormat=topic-schema."""
        self.config = config
        self.conversion = SinkConversion(config)
        self.key_converter, self.value_converter = self.conversion.key_converter, self.conversion.value_converter
        self.topic_schemas = topic_schemas
        if config.message_format == "topic-schema" and topic_schemas is None:
            raise ValueError("messageFormat=topic-schema needs the topics' schemas")

    def convert(self, record: KafkaRecord) -> OutgoingMessage | None:
        """The message for a record, or None when it has no data and no attributes, or a transform dropped it
        (skipped)."""
        cfg = self.config
        converted = self.conversion.convert(record)
        if converted is None:
            return None
        connect, headers = converted
        topic, timestamp = connect.topic, connect.timestamp
        key_schema, key, value_schema, value = connect.key_schema, connect.key, connect.value_schema, connect.value

        attrs = _Attributes()
        key_text = ""
        if key is not None:
            attrs.put_value(KEY_ATTRIBUTE, key_schema, key)
            key_text = attrs.values[KEY_ATTRIBUTE]
        if cfg.metadata_publish:
            attrs.put_text("kafka.topic", topic)
            attrs.put_text("kafka.partition", str(record.partition))
            attrs.put_text("kafka.offset", str(record.offset))
            if timestamp is not None:
                attrs.put_text("kafka.timestamp", str(timestamp))

        data = b""
        if cfg.message_format == "json":
            if value is not None:
                data = json.dumps(value_to_json(value_schema, value), separators=(",", ":")).encode("utf-8")
        elif cfg.message_format == "topic-schema":
            if value is not None:
                codec = self.topic_schemas(topic)
                try:
                    data = codec.encode(value_schema, value)
                except ConversionError as exc:
                    raise RecordError(f"the value does not fit the schema of {codec.topic_schema.topic}: {exc}") from None
        elif value_schema is not None and value_schema.type == "STRUCT" and value is not None:
            data = self._struct_to_attributes(value, attrs)
        elif value_schema is not None and value_schema.type == "MAP" and value is not None:
            data = self._map_to_attributes(value_schema, value, attrs)
        else:
            data = encode_data(value_schema, value)

        if len(attrs.values) > MAX_ATTRIBUTES:
            raise RecordError(f"{len(attrs.values)} attributes; Pub/Sub allows {MAX_ATTRIBUTES}")
        headers_dropped = 0
        if cfg.headers_publish:
            for header_key, header_value in headers:
                headers_dropped += not attrs.offer_header(header_key, header_value)
        if len(data) > MAX_MESSAGE_BYTES:
            raise RecordError(f"message data is {len(data)} bytes; Pub/Sub allows {MAX_MESSAGE_BYTES}")
        if not data and not attrs.values:
            return None

        ordering_key = ""
        if cfg.ordering_key_source == "key" and key_text:
            ordering_key = key_text
        elif cfg.ordering_key_source == "partition":
            ordering_key = str(record.partition)
        if len(ordering_key.encode("utf-8")) > MAX_ORDERING_KEY_BYTES:
            raise RecordError(f"ordering key is over {MAX_ORDERING_KEY_BYTES} bytes")
        return OutgoingMessage(data, attrs.values, ordering_key, headers_dropped,
                               topic if topic != record.topic else None)

    def _struct_to_attributes(self, value: Struct, attrs: _Attributes) -> bytes:
        data = b""
        for f in value.schema.fields:
            if f.schema.type in ("MAP", "STRUCT"):
                raise RecordError(f"struct field {f.name!r} is a {f.schema.type}; it cannot become an attribute")
            v = value.get(f.name)
            if v is None:
                if not f.schema.optional:
                    raise RecordError(f"required struct field {f.name!r} is null")
                continue
            if f.name == self.config.message_body_name:
                data = encode_data(f.schema, v)
            else:
                attrs.put_value(f.name, f.schema, v)
        return data

    def _map_to_attributes(self, schema: Schema, value: dict, attrs: _Attributes) -> bytes:
        data = b""
        for k, v in value.items():
            name = java_string(k, schema.key_schema)
            if name == self.config.message_body_name:
                data = b"" if v is None else (
                    bytes(v) if isinstance(v, (bytes, bytearray)) else java_string(v, schema.value_schema).encode()
                )
            else:
                attrs.put_value(name, schema.value_schema, v)
        return data
