"""The reader's records as Arrow rows: the columns and types the sinks' delivery takes, and Kafka's Java
timestamp types (librdkafka numbers them one higher)."""

from __future__ import annotations

from dataclasses import dataclass

from connectors.kafka.range_reader import RECORD_SCHEMA, RECORD_SCHEMA_WITH_HEADERS, arrow_batch
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
    def error(self): return None


MESSAGES = [_Message(7, b"k", b"v", (1, 1_700_000_000_000), [("h", b"1"), ("h", None)]),
            _Message(9, None, None, (2, 1_700_000_000_001)),
            _Message(10, b"", b"x", (0, -1), [])]


def test_records_keep_offsets_keys_values_and_kafkas_timestamp_types():
    batch = arrow_batch("t", 3, MESSAGES, include_headers=True)
    assert batch.schema == RECORD_SCHEMA_WITH_HEADERS
    records = list(records_from_arrow(batch))
    assert [(r.topic, r.partition, r.offset, r.key, r.value) for r in records] == [
        ("t", 3, 7, b"k", b"v"), ("t", 3, 9, None, None), ("t", 3, 10, b"", b"x")]
    assert [(r.timestamp_type, r.timestamp_ms) for r in records] == [
        (CREATE_TIME, 1_700_000_000_000), (LOG_APPEND_TIME, 1_700_000_000_001), (-1, -1)]
    assert [r.headers for r in records] == [[("h", b"1"), ("h", None)], [], []]


def test_without_headers_the_column_is_left_out():
    batch = arrow_batch("t", 0, MESSAGES, include_headers=False)
    assert batch.schema == RECORD_SCHEMA and "headers" not in batch.schema.names
    assert [r.headers for r in records_from_arrow(batch)] == [[], [], []]


def test_a_stream_commit_carries_its_stream_and_counts_in_the_commit_metadata():
    from connectors.framework.sink_tally import COUNTERS
    from connectors.framework.delivered import DeliveredCommit

    commit = DeliveredCommit("abc123", {"records": 7, "published": 5, "skipped": 2})
    text = commit.to_metadata()
    assert len(text) < 200  # Kafka keeps 4096 bytes of commit metadata by default
    back = DeliveredCommit.from_metadata(text)
    assert back.writer_id == "abc123" and back.counts == {name: commit.counts.get(name, 0) for name in COUNTERS}
    # Kafka Connect's own commits (empty metadata) and anything else are not a stream's
    assert DeliveredCommit.from_metadata("") is None and DeliveredCommit.from_metadata(None) is None
    assert DeliveredCommit.from_metadata('{"other": 1}') is None


def test_a_stream_commit_carries_the_counts_its_sink_names():
    """A sink with a delivery of its own (the archive: records, files, bytes) commits its own counts, read back by
    the same names."""
    from connectors.framework.delivered import DeliveredCommit
    from connectors.s3_block_gzip_sink.batch import COUNTERS

    commit = DeliveredCommit("abc123", {"records": 7, "files": 2, "bytes_uncompressed": 90, "bytes_written": 40,
                                        "skipped": 1, "filtered": 3})
    assert DeliveredCommit.from_metadata(commit.to_metadata(COUNTERS), COUNTERS) == commit


def test_a_batch_is_delivered_in_parts_each_knowing_where_it_ends_per_partition():
    from connectors.framework.spark_read import _Part

    batches = [arrow_batch("t", 0, MESSAGES[:1], False), arrow_batch("t", 1, MESSAGES[1:2], False),
               arrow_batch("t", 0, MESSAGES[2:], False)]
    source = iter(batches)
    # a part of no time still takes one batch (a part always moves something), and no more
    first = _Part(source, 0)
    assert [b.num_rows for b in first] == [1] and first.ends == {("t", 0): 8} and not first.exhausted
    rest = _Part(source, 60)
    assert len(list(rest)) == 2 and rest.ends == {("t", 1): 10, ("t", 0): 11} and rest.exhausted
    last = _Part(source, 60)
    assert list(last) == [] and last.ends == {} and last.exhausted


class _StallingConsumer:
    """A consumer that serves `serves` records of the assigned partition and then nothing, as librdkafka's can
    after a broker restart (confluentinc/librdkafka#5153)."""
    made: list["_StallingConsumer"] = []

    def __init__(self, config, serves: int):
        self.serves, self.closed, self.assigned = serves, False, []
        _StallingConsumer.made.append(self)

    def assign(self, partitions):
        self.assigned.append(partitions[0].offset)
        self.next = partitions[0].offset

    def unassign(self):
        pass

    def consume(self, num_messages, timeout):
        assert not self.closed
        if self.serves <= 0:
            return []
        n = min(num_messages, self.serves)
        self.serves -= n
        self.next += n
        return [_Message(o, None, b"v", (1, 0)) for o in range(self.next - n, self.next)]

    def close(self):
        self.closed = True


def test_a_range_that_stalls_is_read_on_through_a_new_consumer_from_where_it_stopped(monkeypatch):
    from connectors.kafka import range_reader
    from connectors.kafka.admin import PartitionRange

    servings = iter([30, 10_000])  # the first consumer stalls after 30 records, the second serves the rest
    monkeypatch.setattr(range_reader, "Consumer", lambda config: _StallingConsumer(config, next(servings)))
    monkeypatch.setattr(range_reader, "STALL_REOPEN_S", 0.3)
    _StallingConsumer.made.clear()
    settings = range_reader.ReaderSettings({"bootstrap.servers": "b:9092"}, "b:9092", outage_timeout_s=30,
                                           include_headers=False, batch_records=20)
    batches = list(range_reader.read_ranges(settings, [PartitionRange("t", 0, 5, 105)],
                                            range_reader.RangeConsumer(settings.consumer_config())))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(5, 105))  # nothing skipped, nothing twice
    first, second = _StallingConsumer.made
    assert first.closed and first.assigned == [5] and second.assigned == [35] and not second.closed


def test_a_range_that_stays_silent_ends_in_the_outage_error_naming_where_it_stopped(monkeypatch):
    import pytest

    from connectors.kafka import range_reader
    from connectors.kafka.admin import PartitionRange
    from connectors.outage import Unreachable

    monkeypatch.setattr(range_reader, "Consumer", lambda config: _StallingConsumer(config, 0))
    monkeypatch.setattr(range_reader, "STALL_REOPEN_S", 0.2)
    _StallingConsumer.made.clear()
    settings = range_reader.ReaderSettings({"bootstrap.servers": "b:9092"}, "b:9092", outage_timeout_s=0.7)
    with pytest.raises(Unreachable, match="topic t partition 2 at offset 0"):
        list(range_reader.read_ranges(settings, [PartitionRange("t", 2, 0, 10)],
                                      range_reader.RangeConsumer(settings.consumer_config())))
    assert 2 <= len(_StallingConsumer.made) <= 5  # made again each quiet spell, until the outage timeout


def test_the_next_task_reads_through_the_kept_consumer_unless_the_last_one_failed(monkeypatch):
    import pytest

    from connectors.kafka import connection, range_reader
    from connectors.kafka.admin import PartitionRange
    from connectors.outage import Unreachable

    servings = iter([10, 10])
    monkeypatch.setattr(range_reader, "Consumer", lambda config: _StallingConsumer(config, next(servings)))
    monkeypatch.setattr(range_reader, "STALL_REOPEN_S", 60)
    monkeypatch.setattr(connection, "_KEPT_CLIENTS", {})  # this process's kept clients: none before, none left after
    _StallingConsumer.made.clear()
    settings = range_reader.ReaderSettings({"bootstrap.servers": "b:9092"}, "b:9092", outage_timeout_s=0.3,
                                           include_headers=False)
    assert len(list(range_reader.read_ranges(settings, [PartitionRange("t", 0, 0, 10)]))) == 1
    assert len(_StallingConsumer.made) == 1  # made for the first task ...
    first = _StallingConsumer.made[0]
    first.serves = 10
    assert len(list(range_reader.read_ranges(settings, [PartitionRange("t", 0, 10, 20)]))) == 1
    assert _StallingConsumer.made == [first]  # ... and kept for the next
    first.serves = 0
    with pytest.raises(Unreachable):
        list(range_reader.read_ranges(settings, [PartitionRange("t", 0, 20, 30)]))
    list(range_reader.read_ranges(settings, [PartitionRange("t", 0, 20, 30)]))
    assert len(_StallingConsumer.made) == 2 and _StallingConsumer.made[1] is not first  # a failed task's is dropped
