"""A Kafka sink's send-to-arrival latency as bucket counts: bucketed at each bound, summed in ms, records without
a timestamp left out; counted by the tally, carried by stream commits (also ones made before the buckets existed),
and added up over a continuous run's commit window."""

from __future__ import annotations

import pyarrow as pa

from bridge_assets.continuous import CommitWindow
from connectors.config.common import ErrorHandlingKeys
from connectors.framework.delivered import DeliveredCommit
from connectors.framework.latency import BUCKET_FIELDS, SUM_FIELD, latency_counts
from connectors.kafka.range_reader import RECORD_SCHEMA
from connectors.framework.sink_tally import COUNTERS, SinkTally
from connectors.plugin import BatchReport


def test_each_latency_falls_in_the_first_bucket_whose_bound_it_does_not_pass():
    now = 1_000_000
    stamps = [now - 50, now - 51, now - 1_000, now + 20, now - 400_000, -1]  # the last: no timestamp
    counts = latency_counts([pa.array(stamps, pa.int64()), pa.array([None], pa.int64())], now)
    assert counts["latency_le_50ms"] == 2  # 50 ms, and a stamp from a clock ahead (0)
    assert counts["latency_le_100ms"] == 1 and counts["latency_le_1000ms"] == 1
    assert counts["latency_over_300000ms"] == 1
    assert sum(counts[name] for name in BUCKET_FIELDS) == 5
    assert counts[SUM_FIELD] == 50 + 51 + 1_000 + 0 + 400_000


def test_the_tally_counts_every_partitions_records_when_it_sums_up():
    tally = SinkTally("b", ErrorHandlingKeys.model_validate({}), {})
    sent_ms = pa.array([0, 0, 0], pa.int64())  # 1970: each over the last bound
    batch = pa.RecordBatch.from_pydict(
        {"topic": ["t", "t", "u"], "partition": pa.array([0, 1, 0], pa.int32()), "offset": [1, 2, 3],
         "timestamp_ms": sent_ms, "timestampType": pa.array([0, 0, 0], pa.int32()), "key": [None, None, None],
         "value": [b"a", b"b", b"c"]}, schema=pa.schema([f for f in RECORD_SCHEMA if f.name != "headers"]))
    tally.read_batch(batch)
    rows = {(r["topic"], r["partition"]): r for r in tally.summary()}
    assert {key: row["latency_over_300000ms"] for key, row in rows.items()} == {("t", 0): 1, ("t", 1): 1, ("u", 0): 1}
    assert all(row["latency_le_50ms"] == 0 for row in rows.values())


def test_a_commit_from_before_the_buckets_reads_them_as_zero():
    old = '{"stream":"s","counts":[5,5,0,0,0,100,0,0]}'  # the eight counts a commit held before
    commit = DeliveredCommit.from_metadata(old)
    assert commit.counts["records"] == 5 and commit.counts["latency_le_50ms"] == 0
    assert set(commit.counts) == set(COUNTERS)
    assert DeliveredCommit.from_metadata(commit.to_metadata()) == commit


def test_a_commit_window_adds_bucket_counts_bucket_by_bucket():
    def report(n: int, buckets: dict) -> BatchReport:
        return BatchReport(n, None, {"records_read": n, "delivery_latency": buckets}, ("records_read", "delivery_latency"),
                           "line")

    window = CommitWindow(opened_at=0.0)
    window.add(report(2, {"latency_le_50ms": 2, "latency_ms_sum": 30}))
    window.add(report(3, {"latency_le_50ms": 1, "latency_le_100ms": 2, "latency_ms_sum": 200}))
    values = window.commit(now=1.0).values
    assert values["records_read"] == 5
    assert values["delivery_latency"] == {"latency_le_50ms": 3, "latency_le_100ms": 2, "latency_ms_sum": 230}


def _records(rows: list[tuple[str, int, bytes | None, bytes | None, int | None]]) -> pa.RecordBatch:
    topics, partitions, keys, values, stamps = (list(column) for column in zip(*rows))
    return pa.RecordBatch.from_pydict(
        {"topic": topics, "partition": pa.array(partitions, pa.int32()), "offset": list(range(len(rows))),
         "timestamp_ms": pa.array(stamps, pa.int64()), "timestampType": pa.array([0] * len(rows), pa.int32()),
         "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())},
        schema=pa.schema([f for f in RECORD_SCHEMA if f.name != "headers"]))


def test_a_few_rows_are_counted_row_by_row_as_many_are_by_column(monkeypatch):
    """An always-on round of a few records is read and its latency counted in Python (fixed Arrow and numpy calls
    cost more than such a round): the same counts, bytes and buckets as the column-wise path, over one partition and
    several, with null keys, values and timestamps."""
    from connectors.framework import latency, sink_tally

    now = 1_000_000
    one = [("t", 0, None, b"a" * 10, now - 40), ("t", 0, b"k", None, now - 120), ("t", 0, b"kk", b"v", None)]
    several = [*one, ("u", 1, b"x", b"yy", now - 3_000), ("t", 1, None, b"z", -1), ("u", 1, None, None, now + 5)]

    def summed(rows: list) -> dict:
        tally = SinkTally("b", ErrorHandlingKeys.model_validate({}), {})
        touched = tally.read_batch(_records(rows))
        summary = {(r["topic"], r["partition"]): r for r in tally.summary()}
        return {"touched": sorted((c.records, c.bytes) for c in touched), "summary": summary,
                "latency": latency.latency_counts([pa.array([s for *_, s in rows], pa.int64())], now)}

    for rows in (one, several):
        by_rows = summed(rows)
        monkeypatch.setattr(sink_tally, "READ_IN_PYTHON_BELOW", 0)
        monkeypatch.setattr(latency, "COUNT_IN_PYTHON_BELOW", 0)
        by_columns = summed(rows)
        monkeypatch.undo()
        assert by_rows["touched"] == by_columns["touched"]
        assert by_rows["latency"] == by_columns["latency"]
        assert by_rows["summary"].keys() == by_columns["summary"].keys()
        # Plain Python values on both paths: a stream adds them up and commits them as JSON, with no Arrow between.
        for summary in (by_rows["summary"], by_columns["summary"]):
            assert all(type(v) in (int, str, type(None)) for row in summary.values() for v in row.values())
        for where, row in by_rows["summary"].items():  # the buckets of a summary count from its own time
            assert {k: v for k, v in row.items() if not k.startswith("latency_")} == \
                {k: v for k, v in by_columns["summary"][where].items() if not k.startswith("latency_")}
            assert sum(v for k, v in row.items() if k.startswith("latency_le_") or k.startswith("latency_over_")) == \
                sum(v for k, v in by_columns["summary"][where].items()
                    if k.startswith("latency_le_") or k.startswith("latency_over_"))
    assert summed(several)["latency"]["latency_le_50ms"] == 2 and summed(several)["latency"][SUM_FIELD] == 3_160
