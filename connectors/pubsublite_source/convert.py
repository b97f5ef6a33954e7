"""Pub/Sub Lite SequencedMessage -> Kafka record, one to one as the reference PubSubLiteSourceTask.

Key bytes (empty -> null), data -> value, every attribute value -> a header of that key,
event_time else publish_time -> timestamp (epoch ms). Null keys go round robin over the Kafka
partitions; non-empty keys are left to the producer's murmur2 partitioner, so equal keys share a
partition and land where a Java producer would put them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connectors.kafka_connect.data import BYTES, OPTIONAL_BYTES
from connectors.transforms.conversion import source_record
from connectors.transforms.record import ConnectRecord, Header


@dataclass
class LiteRecord:
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    partition: int | None  # None: the producer's partitioner decides (keyed records)
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    topic: str | None = None  # the topic transforms gave the record (None: kafka.topic)


class PubSubLiteSourceConverter:
    def __init__(self, config, kafka_partition_count: int, round_robin_start: int = 0):
        self.key_converter = config.key_converter_instance()
        self.value_converter = config.value_converter_instance()
        self.kafka_topic = config.kafka_topic
        self.kafka_partition_count = kafka_partition_count
        self._next = round_robin_start
        self.transforms = config.transforms.running() if config.transforms else None

    def convert(self, sequenced) -> LiteRecord | None:
        """`sequenced` is a raw google.cloud.pubsublite.v1.SequencedMessage; None when a transform dropped it (a
        transform that fails raises TransformFailed)."""
        message = sequenced.message
        key = bytes(message.key) or None
        partition = None
        if key is None:
            partition = self._next % self.kafka_partition_count
            self._next += 1
        # As the reference: the key is optional BYTES, the value required BYTES (a JsonConverter envelope shows it).
        made = (self.kafka_topic, partition, OPTIONAL_BYTES, key, BYTES, bytes(message.data),
                record_timestamp_ms(sequenced))
        headers = attribute_headers(message)
        if self.transforms is not None:  # the record is made only for them, off the hot path of plain bridges
            converted = source_record(self.transforms, ConnectRecord(*made), headers, _bytes_header)
            if converted is None:
                return None
            made, headers = converted[0][:7], converted[1]
        topic, partition, key_schema, key, value_schema, value, timestamp = made
        return LiteRecord(
            key=self.key_converter.from_connect(key_schema, key, topic),
            value=self.value_converter.from_connect(value_schema, value, topic),
            timestamp_ms=timestamp, partition=partition, headers=headers,
            topic=topic if topic != self.kafka_topic else None,
        )


def _bytes_header(key: str, value: bytes) -> Header:
    return Header(key, OPTIONAL_BYTES, value)


def record_timestamp_ms(sequenced) -> int:
    """The message's event time, else its publish time, in epoch ms."""
    message = sequenced.message
    stamp = message.event_time if message.HasField("event_time") else sequenced.publish_time
    return stamp.ToMilliseconds()


def attribute_headers(message) -> list[tuple[str, bytes]]:
    """Every value of every attribute as a header of the attribute's name, names sorted."""
    return [(name, bytes(value)) for name in sorted(message.attributes) for value in message.attributes[name].values]
