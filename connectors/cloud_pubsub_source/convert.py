"""Pub/Sub message -> Kafka record, as the reference CloudPubSubSourceTask builds its SourceRecords.

Value: the data as BYTES when the message has no attributes besides the key and timestamp
attributes; otherwise a STRUCT with `message` (bytes) first, then one string field per remaining
attribute in sorted order (the reference's order is a map's; sorted is fixed and documented), then
`orderingKey` when cps.makeOrderingKeyAttribute is on and the key is not empty. With
kafka.record.headers=true the value stays BYTES and every attribute becomes a record header.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connectors.cloud_pubsub_source.config import ORDERING_KEY, CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.partitioning import Partitioner
from connectors.errors import RecordRefused
from connectors.kafka_connect.converters import ByteArrayConverter, StringConverter
from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import OPTIONAL_BYTES, OPTIONAL_STRING, Field, Schema, Struct
from connectors.transforms.chain import TransformFailed
from connectors.transforms.conversion import source_record
from connectors.transforms.record import ConnectRecord, Header

MESSAGE_FIELD = "message"
ORDERING_KEY_FIELD = "orderingKey"
_BYTES = Schema("BYTES")
_STRING = Schema("STRING")


@dataclass(frozen=True)
class PubSubMessageIn:
    data: bytes
    attributes: dict[str, str]
    ordering_key: str
    publish_time_ms: int


@dataclass
class OutgoingRecord:
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    partition: int | None  # None: the producer's partitioner decides
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    topic: str | None = None  # the topic transforms gave the record (None: kafka.topic)


def _text_header(key: str, value: bytes) -> Header:
    """Attributes are text: headers of a STRING schema, as the Java connector adds them."""
    return Header(key, _STRING, value.decode("utf-8"))


class MessageError(RecordRefused, ValueError):
    """A message the bridge cannot turn into a record with the configured converters."""


class CloudPubSubSourceConverter:
    def __init__(self, config: CloudPubSubSourceConfig, partitioner_start: int = 0, topic_codec=None):
        """`topic_codec`: the subscription's topic's TopicCodec, for messageFormat=topic-schema."""
        self.config = config
        self.topic_codec = topic_codec
        self.key_converter = config.key_converter_instance()
        self.value_converter = config.value_converter_instance()
        self.partitioner = Partitioner(config.kafka_partition_scheme, config.kafka_partition_count, partitioner_start)
        self.transforms = config.transforms.running() if config.transforms else None
        # A message with no attributes and no ordering key, without a topic schema or transforms, has a record
        # whatever the other keys say: no key, its data as the value, no headers, its publish time (plain_record).
        self._plain_key: bytes | None = None
        self._plain = topic_codec is None and self.transforms is None
        if self._plain:
            try:
                self._plain_key = self.key_converter.from_connect(OPTIONAL_STRING, None, config.kafka_topic)
            except Exception:  # each message meets it again in `convert`, where errors.tolerance decides
                self._plain = False

    def key_text(self, message: PubSubMessageIn) -> str | None:
        attribute = self.config.kafka_key_attribute
        if attribute is None:
            return None
        if attribute == ORDERING_KEY:
            return message.ordering_key or None
        return message.attributes.get(attribute)

    def timestamp_ms(self, message: PubSubMessageIn) -> int:
        attribute = self.config.kafka_timestamp_attribute
        if attribute and attribute in message.attributes:
            try:
                return int(message.attributes[attribute])
            except ValueError:
                pass  # not epoch milliseconds: fall back to the publish time, as the reference does
        return message.publish_time_ms

    def value(self, message: PubSubMessageIn) -> tuple[Schema, object, list[tuple[str, bytes]]]:
        cfg = self.config
        with_ordering_key = cfg.cps_make_ordering_key_attribute and bool(message.ordering_key)
        if self.topic_codec is not None:
            schema, value = self.topic_codec.decode(message.data, message.attributes)
            headers = [(k, v.encode("utf-8")) for k, v in sorted(message.attributes.items())]
            if with_ordering_key:
                headers.append((ORDERING_KEY_FIELD, message.ordering_key.encode("utf-8")))
            return schema, value, headers
        if cfg.kafka_record_headers:
            headers = [(k, v.encode("utf-8")) for k, v in sorted(message.attributes.items())]
            if with_ordering_key:
                headers.append((ORDERING_KEY_FIELD, message.ordering_key.encode("utf-8")))
            return OPTIONAL_BYTES, message.data, headers
        skip = {cfg.kafka_key_attribute, cfg.kafka_timestamp_attribute}
        extra = sorted((k, v) for k, v in message.attributes.items() if k not in skip)
        if not extra and not with_ordering_key:
            return OPTIONAL_BYTES, message.data, []
        fields = [Field(MESSAGE_FIELD, _BYTES)] + [Field(k, _STRING) for k, _ in extra]
        values: dict[str, object] = {MESSAGE_FIELD: message.data, **dict(extra)}
        if with_ordering_key:
            fields.append(Field(ORDERING_KEY_FIELD, _STRING))
            values[ORDERING_KEY_FIELD] = message.ordering_key
        schema = Schema("STRUCT", fields=tuple(fields))
        return schema, Struct(schema, values), []

    def plain_record(self, message) -> OutgoingRecord | None:
        """The record of a raw protobuf PubsubMessage with no attributes and no ordering key, as `convert` makes it,
        or None for any other message (it goes through `convert`). Written apart because building the message and
        its Connect value cost a pull task a third of its CPU per message (bench.profile_source --counter) while
        most messages carry neither."""
        if not self._plain or message.attributes or message.ordering_key:
            return None
        data = message.data
        try:
            value = self.value_converter.from_connect(OPTIONAL_BYTES, data, self.config.kafka_topic)
        except ConversionError as exc:
            raise MessageError(str(exc)) from exc
        published = message.publish_time  # Timestamp.ToMilliseconds() without its range check: a tenth of this path
        return OutgoingRecord(self._plain_key, value, published.seconds * 1000 + published.nanos // 1_000_000,
                              self.partitioner.partition(None, data, ""))

    def convert(self, message: PubSubMessageIn) -> OutgoingRecord | None:
        """The Kafka record of a message, or None when a transform dropped it."""
        cfg = self.config
        key = self.key_text(message)
        schema = None
        try:
            schema, value, headers = self.value(message)
            partition = self.partitioner.partition(key, message.data, message.ordering_key)
            made = (cfg.kafka_topic, partition, OPTIONAL_STRING, key, schema, value, self.timestamp_ms(message))
            if self.transforms is not None:  # the record is made only for them: it costs a message a third more
                converted = source_record(self.transforms, ConnectRecord(*made), headers, _text_header)
                if converted is None:
                    return None
                made, headers = converted[0][:7], converted[1]
            topic, partition, key_schema, key, schema, value, timestamp = made
            key_bytes = self.key_converter.from_connect(key_schema, key, topic)
            value_bytes = self.value_converter.from_connect(schema, value, topic)
        except TransformFailed as exc:
            raise MessageError(str(exc)) from exc
        except ConversionError as exc:
            hint = ""
            if schema is not None and schema.type == "STRUCT" and isinstance(self.value_converter, (StringConverter, ByteArrayConverter)):
                hint = " (messages with attributes become structs: use JsonConverter, or kafka.record.headers=true)"
            raise MessageError(f"{exc}{hint}") from exc
        return OutgoingRecord(key_bytes, value_bytes, timestamp, partition, headers,
                              topic if topic != cfg.kafka_topic else None)
