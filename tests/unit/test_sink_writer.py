"""The task body every Kafka-reading sink shares (connectors/framework/sink_writer.py): the writer is put each batch and
flushed before the summary exists; a failure leaves the writer with the error and yields no summary; what a writer
rejects goes through errors.tolerance."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connectors.config.common import ErrorHandlingKeys
from connectors.kafka.range_reader import RECORD_SCHEMA_WITH_HEADERS
from connectors.errors import RecordError
from connectors.framework.sink_tally import TalliedBatch
from connectors.framework.sink_writer import SinkWriter, TallySettings, write_records


def _records(partition: int, offsets: range, values=None) -> pa.RecordBatch:
    n = len(offsets)
    values = values if values is not None else [f"v{o}".encode() for o in offsets]
    return pa.RecordBatch.from_pydict({
        "topic": ["t"] * n, "partition": [partition] * n, "offset": list(offsets), "timestamp_ms": [0] * n,
        "timestampType": [0] * n, "key": [None] * n, "value": values, "headers": [[]] * n,
    }, schema=RECORD_SCHEMA_WITH_HEADERS)


class _AtFlush(SinkWriter):
    """Delivers at flush; rejects empty values; remembers how it was left."""

    events: list = []

    def __init__(self, fail_flush: bool, tally):
        super().__init__(tally)
        self.fail_flush, self.held = fail_flush, []

    def put(self, records: pa.RecordBatch) -> None:
        _AtFlush.events.append(("put", records.num_rows))
        tallied = TalliedBatch(records, self.tally)
        for row, value in enumerate(records.column("value").to_pylist()):
            if value == b"":
                self.tally.reject(tallied.record(row), "TEST", RecordError("empty"))
            else:
                self.held.append(tallied.counts(row))

    def flush(self) -> None:
        _AtFlush.events.append(("flush",))
        if self.fail_flush:
            raise RuntimeError("the destination did not answer")
        for counts in self.held:
            counts.published += 1

    def __exit__(self, exc_type, exc, traceback):
        _AtFlush.events.append(("exit", exc_type))


def _settings(**keys) -> TallySettings:
    return TallySettings("bridge", ErrorHandlingKeys.model_validate(keys), {})


def _summary(summaries: list[list[dict]]) -> dict[int, dict]:
    return {row["partition"]: row for rows in summaries for row in rows}


def test_every_batch_is_put_then_flushed_before_the_summary():
    _AtFlush.events = []
    body = write_records(_settings(), lambda tally: _AtFlush(False, tally),
                         iter([_records(0, range(0, 3)), _records(0, range(3, 5)), _records(1, range(0, 4))]))
    summary = _summary(list(body))
    assert _AtFlush.events == [("put", 3), ("put", 2), ("put", 4), ("flush",), ("exit", None)]
    assert (summary[0]["records"], summary[0]["published"]) == (5, 5)
    assert (summary[1]["records"], summary[1]["published"]) == (4, 4)


def test_a_failed_flush_leaves_the_writer_with_the_error_and_yields_no_summary():
    _AtFlush.events = []
    body = write_records(_settings(), lambda tally: _AtFlush(True, tally), iter([_records(0, range(2))]))
    with pytest.raises(RuntimeError, match="did not answer"):
        list(body)
    assert _AtFlush.events[-1] == ("exit", RuntimeError)


def test_a_rejected_record_fails_the_task_by_default_and_is_dropped_under_tolerance_all():
    batch = _records(0, range(3), [b"a", b"", b"c"])
    with pytest.raises(RecordError, match="offset 1"):
        list(write_records(_settings(), lambda tally: _AtFlush(False, tally), iter([batch])))
    summary = _summary(list(write_records(_settings(**{"errors.tolerance": "all"}),
                                          lambda tally: _AtFlush(False, tally), iter([batch]))))
    assert (summary[0]["records"], summary[0]["published"], summary[0]["failed_dropped"]) == (3, 2, 1)
