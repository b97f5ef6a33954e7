"""The reader's records as Arrow rows: the columns and types the sinks' delivery takes, and Kafka's Java
timestamp types (librdkafka numbers them one higher)."""

from __future__ import annotations

from dataclasses import dataclass

from connectors.kafka.admin import PartitionRange
from connectors.kafka.range_reader import RECORD_SCHEMA, RECORD_SCHEMA_WITH_HEADERS, _arrow_batch
from connectors.kafka.record import CREATE_TIME, LOG_APPEND_TIME, records_from_arrow


@dataclass
class _Message:  # the parts of confluent_kafka.Message the reader calls
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _timestamp: tuple[int, int]
    _headers: list | None = None

    def offset(self): return self._offset
    def key(self): return self._key
    def value(self): return self._value
    def timestamp(self): return self._timestamp
    def headers(self): return self._headers


MESSAGES = [_Message(7, b"k", b"v", (1, 1_700_000_000_000), [("h", b"1"), ("h", None)]),
            _Message(9, None, None, (2, 1_700_000_000_001)),
            _Message(10, b"", b"x", (0, -1), [])]


def test_records_keep_offsets_keys_values_and_kafkas_timestamp_types():
    batch = _arrow_batch(PartitionRange("t", 3, 7, 11), MESSAGES, include_headers=True)
    assert batch.schema == RECORD_SCHEMA_WITH_HEADERS
    records = list(records_from_arrow(batch))
    assert [(r.topic, r.partition, r.offset, r.key, r.value) for r in records] == [
        ("t", 3, 7, b"k", b"v"), ("t", 3, 9, None, None), ("t", 3, 10, b"", b"x")]
    assert [(r.timestamp_type, r.timestamp_ms) for r in records] == [
        (CREATE_TIME, 1_700_000_000_000), (LOG_APPEND_TIME, 1_700_000_000_001), (-1, -1)]
    assert [r.headers for r in records] == [[("h", b"1"), ("h", None)], [], []]


def test_without_headers_the_column_is_left_out():
    batch = _arrow_batch(PartitionRange("t", 0, 7, 11), MESSAGES, include_headers=False)
    assert batch.schema == RECORD_SCHEMA and "headers" not in batch.schema.names
    assert [r.headers for r in records_from_arrow(batch)] == [[], [], []]
