"""messageFormat=topic-schema: message data encoded by the Pub/Sub topic's own schema (Avro or Protobuf,
binary or JSON as the topic's schema settings say), so topics that validate messages accept them.

Each task reads a topic's schema settings and schema once, on the first record for that topic. The
encoder is the check: a value that does not fit the schema is a bad record (errors.tolerance), never sent.
pstest keeps schemas and topic schema settings but does not validate what is published; the real service does.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Callable

from connectors.errors import BatchError
from connectors.kafka.record import RecordError
from connectors.kafka_connect.converters import ConversionError
from connectors.kafka_connect.data import Schema, Struct
from connectors.kafka_connect.registry import avro_data, protobuf_data


@dataclass(frozen=True)
class TopicSchema:
    kind: str  # "AVRO" or "PROTOCOL_BUFFER"
    encoding: str  # "BINARY" or "JSON"
    definition: str
    name: str


class TopicSchemas:
    """The schema of each target topic, looked up through the task's Pub/Sub channel."""

    def __init__(self, channel_factory: Callable[[], Any]):
        self._channel_factory = channel_factory
        self._encoders: dict[str, Callable[[Schema | None, Any], bytes]] = {}

    def encode(self, topic_path: str, schema: Schema | None, value: Any) -> bytes:
        encoder = self._encoders.get(topic_path)
        if encoder is None:
            encoder = self._encoders[topic_path] = _encoder(self._lookup(topic_path))
        if not isinstance(value, Struct):
            raise RecordError(f"messageFormat=topic-schema needs a STRUCT value; this record's value is "
                              f"{schema.type if schema else type(value).__name__}")
        try:
            return encoder(schema, value)
        except ConversionError as exc:
            raise RecordError(f"the value does not fit the schema of {topic_path}: {exc}") from None

    def _lookup(self, topic_path: str) -> TopicSchema:
        from google.pubsub_v1 import PublisherClient, SchemaServiceClient
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
        from google.pubsub_v1.services.schema_service.transports import SchemaServiceGrpcTransport
        from google.pubsub_v1.types import Encoding, GetSchemaRequest, SchemaView

        channel = self._channel_factory()
        topic = PublisherClient(transport=PublisherGrpcTransport(channel=channel)).get_topic(topic=topic_path)
        settings = topic.schema_settings
        if not settings.schema:
            raise BatchError(f"messageFormat=topic-schema: Pub/Sub topic {topic_path} has no schema")
        if settings.schema.endswith("/schemas/_deleted-schema_"):
            raise BatchError(f"messageFormat=topic-schema: the schema of Pub/Sub topic {topic_path} was deleted")
        found = SchemaServiceClient(transport=SchemaServiceGrpcTransport(channel=channel)).get_schema(
            request=GetSchemaRequest(name=settings.schema, view=SchemaView.FULL))
        encoding = "JSON" if settings.encoding == Encoding.JSON else "BINARY"
        return TopicSchema(found.type_.name, encoding, found.definition, settings.schema)


def _encoder(topic_schema: TopicSchema) -> Callable[[Schema | None, Any], bytes]:
    if topic_schema.kind == "AVRO":
        return _avro_encoder(topic_schema)
    if topic_schema.kind == "PROTOCOL_BUFFER":
        return _protobuf_encoder(topic_schema)
    raise BatchError(f"schema {topic_schema.name} is of type {topic_schema.kind}, neither AVRO nor PROTOCOL_BUFFER")


def _avro_encoder(topic_schema: TopicSchema) -> Callable[[Schema | None, Any], bytes]:
    from fastavro import json_writer, schemaless_writer, validate

    try:
        parsed = avro_data.parse(topic_schema.definition).parsed
    except ConversionError as exc:
        raise BatchError(f"schema {topic_schema.name}: {exc}") from None

    def encode(schema: Schema | None, value: Any) -> bytes:
        record = avro_data.to_avro_value(schema, value)
        try:
            validate(record, parsed, raise_errors=True)
        except Exception as exc:  # fastavro's ValidationError lists each field that does not fit
            raise ConversionError(str(exc)) from None
        out = io.StringIO() if topic_schema.encoding == "JSON" else io.BytesIO()
        if topic_schema.encoding == "JSON":
            json_writer(out, parsed, [record])
            return out.getvalue().rstrip("\n").encode("utf-8")
        schemaless_writer(out, parsed, record)
        return out.getvalue()

    return encode


def _protobuf_encoder(topic_schema: TopicSchema) -> Callable[[Schema | None, Any], bytes]:
    from google.protobuf import json_format
    from google.protobuf.message_factory import GetMessageClass

    try:
        proto = protobuf_data.compile_proto_text("topic_schema.proto", topic_schema.definition, [])
        pool = protobuf_data.new_pool()
        file = pool.Add(proto)
    except ConversionError as exc:
        raise BatchError(f"schema {topic_schema.name}: {exc}") from None
    # Pub/Sub's Protobuf schemas hold exactly one top-level message type.
    message_class = GetMessageClass(next(iter(file.message_types_by_name.values())))

    def encode(schema: Schema | None, value: Any) -> bytes:
        message = message_class()
        try:
            protobuf_data.fill(message, schema, value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ConversionError(f"{type(exc).__name__}: {exc}") from None
        if topic_schema.encoding == "JSON":
            return json.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True),
                              separators=(",", ":")).encode("utf-8")
        return message.SerializeToString()

    return encode
