"""The Kafka sink's sending side in pure logic: the produce arguments read from a batch's columns, and which rows
failed delivery reports are about (a report names its record by what it holds, not by its row)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError

from connectors.config.common import ErrorHandlingKeys
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.kafka.range_reader import RECORD_SCHEMA_WITH_HEADERS
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.kafka_sink.write import NO_TIMESTAMP, HandedBatch, ReplicaTarget, Sends, _headers, _timestamps
from tests.unit.kafka_rows import awkward_kafka_rows


@dataclass
class Report:
    """What a delivery report's message tells of its record."""

    target: str
    at: int
    held_key: bytes | None
    held_value: bytes | None
    at_offset: int = -1

    def topic(self) -> str:
        return self.target

    def partition(self) -> int:
        return self.at

    def key(self) -> bytes | None:
        return self.held_key

    def value(self) -> bytes | None:
        return self.held_value

    def offset(self) -> int:
        return self.at_offset


def _rows(places: list[tuple[int, bytes | None, bytes]]) -> pa.RecordBatch:
    n = len(places)
    return pa.RecordBatch.from_pydict({
        "topic": ["src"] * n, "partition": [p for p, _, _ in places], "offset": list(range(n)),
        "timestamp_ms": [0] * n, "timestampType": [0] * n, "key": [k for _, k, _ in places],
        "value": [v for _, _, v in places], "headers": [[]] * n}, schema=RECORD_SCHEMA_WITH_HEADERS)


def _handed(places, same_partition: bool = True) -> HandedBatch:
    tally = SinkTally("t", ErrorHandlingKeys.model_validate({}), {})
    return HandedBatch(TalliedBatch(_rows(places), tally), {"src": "dst"}, same_partition)


def test_each_record_keeps_its_timestamp_and_headers_and_one_without_gets_none():
    batch = awkward_kafka_rows()
    kinds, stamps = batch.column("timestampType").to_pylist(), batch.column("timestamp_ms").to_pylist()
    assert _timestamps(batch) == [0 if kind == NO_TIMESTAMP or stamp is None else stamp
                                  for kind, stamp in zip(kinds, stamps)]
    assert _headers(batch) == [[(h["key"], h["value"]) for h in headers] or None
                               for headers in batch.column("headers").to_pylist()]
    assert _headers(_rows([(0, b"k", b"v")] * 3)) == [None] * 3


def test_reports_of_records_alike_are_matched_to_distinct_rows_in_order():
    handed = _handed([(0, b"a", b"1"), (0, None, b"x"), (0, b"b", b"2"), (0, None, b"x"), (0, None, b"x")])
    handed.skipped.add(1)  # refused before it was sent: no report can be about it
    handed.undelivered += [("e1", Report("dst", 0, None, b"x")), ("e2", Report("dst", 0, None, b"x")),
                           ("e3", Report("dst", 0, b"b", b"2"))]
    assert handed.undelivered_rows() == [(3, "e1"), (4, "e2"), (2, "e3")]
    handed.count_published({3, 4, 2})
    assert handed.slot.single.published == 1  # row 0: five, less the one skipped and the three undelivered


def test_a_report_is_matched_on_its_partition_only_when_records_keep_theirs():
    places = [(0, b"k", b"v"), (1, b"k", b"v")]
    same = _handed(places)
    same.undelivered.append(("e", Report("dst", 1, b"k", b"v")))
    assert same.undelivered_rows() == [(1, "e")]
    keyed = _handed(places, same_partition=False)
    keyed.undelivered.append(("e", Report("dst", 3, b"k", b"v")))  # the partitioner's choice, not the source's
    assert keyed.undelivered_rows() == [(0, "e")]
    keyed.count_published({0})
    assert [keyed.slot.counts(row).published for row in (0, 1)] == [0, 1]


class Producer:
    """Stands in for librdkafka's producer: keeps each record's delivery callback until `poll` reports them, the
    records named in `refusing` (by value) with an error."""

    def __init__(self, refusing: tuple[bytes, ...] = ()):
        self.waiting, self.refusing, self.offsets = [], refusing, 0

    def produce(self, topic, value, key, partition, on_delivery, timestamp, headers) -> None:
        self.waiting.append((on_delivery, Report(topic, partition, key, value, self.offsets)))
        self.offsets += 1

    def poll(self, timeout_s: float = 0) -> int:
        waiting, self.waiting = self.waiting, []
        for report, message in waiting:
            report(KafkaError(KafkaError.INVALID_RECORD) if message.value() in self.refusing else None, message)
        return len(waiting)

    def flush(self, timeout_s: float = 0) -> int:
        self.poll()
        return 0


def _sends(tolerance: str) -> tuple[Sends, SinkTally]:
    config = KafkaSinkConfig.model_validate({"topics": "src", "topic.rename.format": "dst",
                                             "target.bootstrap.servers": "127.0.0.1:9"})
    tally = SinkTally("t", ErrorHandlingKeys.model_validate({"errors.tolerance": tolerance}), {})
    return Sends(ReplicaTarget(config, 1_000_000, 30)), tally


def test_a_batch_whose_records_were_all_acknowledged_is_counted_and_let_go_before_the_task_settles():
    sends, tally = _sends("none")
    producer = Producer()
    slot = TalliedBatch(_rows([(0, b"k", b"v")] * 3), tally)
    counts, gone = slot.single, weakref.ref(slot)
    sends.send(producer, slot)
    del slot
    assert gone() is not None  # its records' callbacks hold it until they are reported
    producer.poll()
    assert gone() is None and counts.published == 3
    assert [(row["landed_source"], row["landed_target"]) for row in tally.summary()] == [(3, 3)]


def test_a_batch_with_a_refused_record_is_kept_until_the_task_settles_and_the_refused_row_is_rejected():
    sends, tally = _sends("all")
    producer = Producer(refusing=(b"bad",))
    sends.send(producer, TalliedBatch(_rows([(0, b"k", b"v"), (0, None, b"bad"), (0, b"k", b"w")]), tally))
    producer.poll()
    assert len(sends.undelivered) == 1
    sends.settle(producer, tally)
    counts = tally.partition("src", 0)
    assert (counts.published, counts.failed_dropped, sends.undelivered) == (2, 1, [])
