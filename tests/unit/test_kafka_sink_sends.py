"""The Kafka sink's sending side in pure logic: the produce arguments read from a batch's columns, and which rows
failed delivery reports are about (a report names its record by what it holds, not by its row)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from connectors.config.common import ErrorHandlingKeys
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.kafka.range_reader import RECORD_SCHEMA_WITH_HEADERS
from connectors.kafka_sink.write import NO_TIMESTAMP, HandedBatch, _headers, _timestamps
from tests.unit.kafka_rows import awkward_kafka_rows


@dataclass
class Report:
    """What a delivery report's message tells of its record."""

    target: str
    at: int
    held_key: bytes | None
    held_value: bytes | None

    def topic(self) -> str:
        return self.target

    def partition(self) -> int:
        return self.at

    def key(self) -> bytes | None:
        return self.held_key

    def value(self) -> bytes | None:
        return self.held_value


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
