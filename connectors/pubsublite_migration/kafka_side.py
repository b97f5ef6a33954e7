"""What the migration asks of Kafka: the target topic, how far the copy got (the `lite.offset` header of each
partition's last record: Kafka itself holds the copy's position, so a killed copy resumes exactly where Kafka's
log ends), where a Lite cursor falls in a partition, and the consumer groups' offsets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from connectors.kafka.admin import KafkaAdmin, PartitionRange
from connectors.kafka.range_reader import RangeConsumer, ReaderSettings, read_ranges

LITE_OFFSET_HEADER = "lite.offset"
OUTAGE_TIMEOUT_S = 30


class CopyMismatch(ValueError):
    """The Kafka topic holds something that is not this migration's copy."""


@dataclass(frozen=True)
class CopiedRecord:
    kafka_offset: int
    lite_offset: int
    key: bytes
    value: bytes


def lite_offset_of(headers, topic: str, partition: int, offset: int) -> int:
    for name, value in headers or ():
        if name == LITE_OFFSET_HEADER:
            return int(value)
    raise CopyMismatch(f"Kafka topic {topic} partition {partition} offset {offset} has no {LITE_OFFSET_HEADER} "
                       "header: the topic holds records that are not a copy of the Lite topic")


class KafkaSide:
    def __init__(self, admin: KafkaAdmin, topic: str):
        self.admin, self.topic = admin, topic
        connection = admin.connection
        self._reader = ReaderSettings(connection.librdkafka_config(), connection.bootstrap_servers, OUTAGE_TIMEOUT_S)
        self._consumer = RangeConsumer(self._reader.consumer_config())

    def close(self) -> None:
        self._consumer.close()

    def partitions(self) -> int | None:
        found = self.admin.partitions([self.topic]).get(self.topic)
        return None if found is None else len(found)

    def create(self, partitions: int, config: dict[str, str]) -> None:
        self.admin.create_topic(self.topic, partitions, config, replication_factor=-1)

    def bounds(self, partitions: int) -> dict[int, tuple[int, int]]:
        """(first, end) offset of each partition."""
        ps = {self.topic: list(range(partitions))}
        starts = self.admin.start_offsets(ps).get(self.topic, {})
        ends = self.admin.end_offsets(ps).get(self.topic, {})
        return {p: (starts.get(p, 0), ends.get(p, 0)) for p in range(partitions)}

    def records(self, partition: int, start: int, end: int) -> Iterator[CopiedRecord]:
        """The copied records of [start, end), in order."""
        for batch in read_ranges(self._reader, [PartitionRange(self.topic, partition, start, end)], self._consumer):
            offsets, keys, values = batch.column("offset"), batch.column("key"), batch.column("value")
            headers = batch.column("headers")
            for i in range(batch.num_rows):
                offset = offsets[i].as_py()
                yield CopiedRecord(offset, lite_offset_of(
                    [(h["key"], h["value"]) for h in headers[i].as_py() or ()], self.topic, partition, offset),
                    keys[i].as_py() or b"", values[i].as_py() or b"")

    def record_at(self, partition: int, offset: int) -> CopiedRecord:
        return next(self.records(partition, offset, offset + 1))

    def last_copied(self, partition: int, first: int, end: int) -> int | None:
        """The Lite offset of the partition's last record (None: the partition is empty)."""
        return None if end <= first else self.record_at(partition, end - 1).lite_offset

    def offset_for(self, partition: int, lite_cursor: int, first: int, end: int) -> int:
        """The Kafka offset of the first record whose Lite offset is at or past `lite_cursor` (`end` when none is):
        a binary search over the copy, whose Lite offsets rise with its Kafka offsets."""
        low, high = first, end
        while low < high:
            middle = (low + high) // 2
            if self.record_at(partition, middle).lite_offset < lite_cursor:
                low = middle + 1
            else:
                high = middle
        return low
