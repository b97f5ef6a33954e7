"""A Pub/Sub topic's own schema (Avro or Protobuf, binary or JSON encoding) as a codec for Connect values.

messageFormat=topic-schema uses it in both directions: the sink encodes each value by its target topic's
schema, so topics that validate messages accept them; the source decodes each message of a subscription
whose topic has a schema into a Connect STRUCT. A task reads a topic's settings and schema once.
The encoder is the sink's check: a value that does not fit is a bad record, never sent. pstest keeps
schemas and topic schema settings but does not validate what is published; the real service does.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from connectors.errors import BatchError
from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import Schema, Struct
from connectors.kafka_connect.registry import avro_data, protobuf_data

# Set by Pub/Sub on each message of a topic with a schema (a revision may change the encoding).
ENCODING_ATTRIBUTE = "googclient_schemaencoding"


@dataclass(frozen=True)
class TopicSchema:
    topic: str  # the topic path whose settings name the schema
    name: str
    kind: str  # "AVRO" or "PROTOCOL_BUFFER"
    encoding: str  # "BINARY" or "JSON"
    definition: str


def lookup_topic_schema(channel, topic_path: str) -> TopicSchema:
    """The schema a topic's settings name, through a gRPC channel to Pub/Sub."""
    from google.pubsub_v1 import PublisherClient, SchemaServiceClient
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
    from google.pubsub_v1.services.schema_service.transports import SchemaServiceGrpcTransport
    from google.pubsub_v1.types import Encoding, GetSchemaRequest, SchemaView

    topic = PublisherClient(transport=PublisherGrpcTransport(channel=channel)).get_topic(topic=topic_path)
    settings = topic.schema_settings
    if not settings.schema or settings.schema.endswith("/_deleted-schema_"):
        raise BatchError(f"messageFormat=topic-schema: Pub/Sub topic {topic_path} has no schema")
    found = SchemaServiceClient(transport=SchemaServiceGrpcTransport(channel=channel)).get_schema(
        request=GetSchemaRequest(name=settings.schema, view=SchemaView.FULL))
    encoding = "JSON" if settings.encoding == Encoding.JSON else "BINARY"
    if found.type_.name not in ("AVRO", "PROTOCOL_BUFFER"):
        raise BatchError(f"schema {settings.schema} of {topic_path} is of type {found.type_.name}")
    return TopicSchema(topic_path, settings.schema, found.type_.name, encoding, found.definition)


class TopicCodec:
    """Encode a Connect STRUCT as, or decode message data to one by, one topic's schema."""

    def __init__(self, topic_schema: TopicSchema):
        self.topic_schema = topic_schema
        try:
            if topic_schema.kind == "AVRO":
                self._avro = avro_data.parse(topic_schema.definition)
            else:
                from google.protobuf.message_factory import GetMessageClass

                proto = protobuf_data.compile_proto_text("topic_schema.proto", topic_schema.definition, [])
                file = protobuf_data.new_pool().Add(proto)
                # A Pub/Sub Protobuf schema holds exactly one top-level message type.
                self._message_class = GetMessageClass(next(iter(file.message_types_by_name.values())))
                self._connect = protobuf_data.connect_schema(self._message_class.DESCRIPTOR)
        except ConversionError as exc:
            raise BatchError(f"schema {topic_schema.name}: {exc}") from None

    def encode(self, schema: Schema | None, value: Any) -> bytes:
        if not isinstance(value, Struct):
            raise ConversionError(f"needs a STRUCT value, not {schema.type if schema else type(value).__name__}")
        if self.topic_schema.kind == "AVRO":
            return self._encode_avro(schema, value)
        from google.protobuf import json_format

        message = self._message_class()
        try:
            protobuf_data.fill(message, schema, value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ConversionError(f"{type(exc).__name__}: {exc}") from None
        if self.topic_schema.encoding == "JSON":
            return json.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True),
                              separators=(",", ":")).encode("utf-8")
        return message.SerializeToString()

    def _encode_avro(self, schema: Schema | None, value: Struct) -> bytes:
        from fastavro import json_writer, schemaless_writer, validate

        record = avro_data.to_avro_value(schema, value)
        try:
            validate(record, self._avro.parsed, raise_errors=True)
        except Exception as exc:  # fastavro's ValidationError lists each field that does not fit
            raise ConversionError(str(exc)) from None
        if self.topic_schema.encoding == "JSON":
            text = io.StringIO()
            json_writer(text, self._avro.parsed, [record])
            return text.getvalue().rstrip("\n").encode("utf-8")
        out = io.BytesIO()
        schemaless_writer(out, self._avro.parsed, record)
        return out.getvalue()

    def decode(self, data: bytes, attributes: dict[str, str]) -> tuple[Schema, Struct]:
        """A message's data; its own googclient_schemaencoding attribute, when it has one, says the encoding."""
        encoding = attributes.get(ENCODING_ATTRIBUTE) or self.topic_schema.encoding
        if self.topic_schema.kind == "AVRO":
            if encoding == "JSON":
                from fastavro import json_reader

                try:
                    [record] = list(json_reader(io.StringIO(data.decode("utf-8")), self._avro.parsed))
                except Exception as exc:
                    raise ConversionError(f"not Avro JSON of {self.topic_schema.name}: {exc}") from None
                return self._avro.connect, avro_data.to_connect_value(self._avro.connect, record)
            return self._avro.connect, avro_data.decode(self._avro, memoryview(data))
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        try:
            if encoding == "JSON":
                message = json_format.Parse(data.decode("utf-8"), self._message_class())
            else:
                message = self._message_class.FromString(data)
        except (DecodeError, json_format.ParseError, UnicodeDecodeError) as exc:
            raise ConversionError(f"not a message of {self.topic_schema.name}: {exc}") from None
        return self._connect, protobuf_data.struct_value(self._connect, message)
