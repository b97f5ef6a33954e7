"""Driver side of every Kafka-reading bridge: one Spark task per planned offset range, each reading its range
in the Python worker (range_reader.py) and handing the records straight to the connector's delivery.

The run holds a lease for the batch (batch_lease.py) and its tasks stop reading once it lapses: a killed run's batch
stops within about a second on either engine.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa
from confluent_kafka import KafkaException, TopicPartition
from pyspark.sql import Row, SparkSession

from connectors.arrow_rows import rows_batch
from connectors.kafka.admin import PartitionRange
from connectors.framework.batch_lease import BatchLease, held_batch_lease, watching
from connectors.kafka.connection import KafkaConnection, group_committer
from connectors.framework.delivered import DeliveredCommit
from connectors.kafka.range_reader import ReaderSettings, read_ranges
from connectors.framework.sink_tally import COUNTERS

__all__ = ["BatchProgress", "Deliver", "deliver_offset_ranges", "split_ranges"]

# Takes a task's records (Arrow batches of range_reader.RECORD_SCHEMA) and whether the task may go on (a batch's lease,
# which a delivery waiting on its destination may ask: SinkWriter.keep_going; None for a stream's), and yields its
# summary rows (a list of dicts at a time), only once the destination has acknowledged every record it was handed.
# Rows, not Arrow: an always-on stream reads them in the same process, where an Arrow batch of a round's one or two
# rows, made and read again, was a quarter of a two-record round's CPU; a batch's task makes them Arrow for Spark.
Deliver = Callable[[Iterator[pa.RecordBatch], Callable[[], bool] | None], Iterator[list[dict]]]


@dataclass(frozen=True)
class BatchProgress:
    """A batch's tasks hand their records to the delivery a part at a time (`every_s` of reading each) and commit
    where each acknowledged part ends to the bridge's Kafka group, as the always-on streams do (stream_task.py):
    a run killed mid-batch is followed by one that starts there, instead of at the batch's start."""

    group: str
    batch_id: str
    every_s: float


def deliver_offset_ranges(
    spark: SparkSession,
    connection: KafkaConnection,
    ranges: list[PartitionRange],
    timeout_s: int,
    deliver: Deliver,
    summary_schema: str,
    consumer_group: str,
    include_headers: bool = True,
    isolation_level: str = "read_uncommitted",
    progress: BatchProgress | None = None,
    min_partitions: int | None = None,
) -> list[Row]:
    """Run `deliver` over the records of every [start, end) range, one Spark task per range, and collect the
    summary rows (`summary_schema`, a Spark DDL string), the tasks held on a lease in `consumer_group`'s lease group.
    A broker silent for `timeout_s` fails the task with one line naming the partition and offset. Without `include_headers` the records have no headers column.
    With `progress`, each task commits what was acknowledged as it goes (the summary must carry the sink's
    counters, sink_tally.SUMMARY_SCHEMA). With `min_partitions`, ranges are split until there are at least that
    many tasks (`split_ranges`)."""
    settings = ReaderSettings({**connection.librdkafka_config(), "isolation.level": isolation_level},
                              connection.bootstrap_servers, timeout_s, include_headers)
    pieces = split_ranges(list(ranges), min_partitions) if min_partitions else [(r, True) for r in ranges]
    with held_batch_lease(connection.librdkafka_config(), consumer_group,
                          (ranges[0].topic, ranges[0].partition)) as lease:
        tasks = spark.range(0, len(pieces), 1, len(pieces))
        return tasks.mapInArrow(functools.partial(_read_and_deliver, settings, pieces, deliver, progress, lease,
                                                  summary_schema), summary_schema).collect()


def split_ranges(ranges: list[PartitionRange], at_least: int) -> list[tuple[PartitionRange, bool]]:
    """The ranges cut into at least `at_least` pieces where there are fewer (each into a share of them as large as
    its share of the records, rounded up), each with whether it is its partition's first piece."""
    total = sum(r.count for r in ranges)
    if len(ranges) >= at_least or total == 0:
        return [(r, True) for r in ranges]
    pieces = []
    for r in ranges:
        parts = max(1, min(r.count, math.ceil(r.count / total * at_least)))
        bounds = [r.start + r.count * i // parts for i in range(parts + 1)]
        pieces += [(PartitionRange(r.topic, r.partition, start, end), start == r.start)
                   for start, end in zip(bounds, bounds[1:])]
    return pieces


def _read_and_deliver(settings: ReaderSettings, pieces: list[tuple[PartitionRange, bool]], deliver: Deliver,
                      progress: BatchProgress | None, lease: BatchLease, summary_schema: str,
                      task_ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    ids = [i for batch in task_ids for i in batch.column(0).to_pylist()]
    mine = [pieces[i][0] for i in ids]
    if not mine:
        return
    what = f"reading {', '.join(f'{r.topic}-{r.partition}' for r in mine)}"
    # A lapse fails the task once what was handed to the delivery is acknowledged (and committed, with progress): a
    # run still there then does not record the batch's end as delivered.
    with watching(lease, settings.client_config, what) as keep_going:
        records = _while_leased(read_ranges(settings, mine), keep_going)
        # Progress is committed only by a partition's first piece: a later piece's end, committed while an earlier
        # piece is still on its way, would skip that piece's rest after a kill.
        if progress is None or not all(pieces[i][1] for i in ids):
            summaries = deliver(records, keep_going)
        else:
            summaries = _deliver_in_parts(settings, progress, functools.partial(deliver, keep_going=keep_going), records)
        for rows in summaries:
            yield rows_batch(rows, summary_schema)


def _while_leased(source: Iterator[pa.RecordBatch], keep_going: Callable[[], bool]) -> Iterator[pa.RecordBatch]:
    """The records of `source` while `keep_going` says so (asked between Arrow batches)."""
    for batch in source:
        yield batch
        if not keep_going():
            return


def _deliver_in_parts(settings: ReaderSettings, progress: BatchProgress,
                      deliver: Callable[[Iterator[pa.RecordBatch]], Iterator[list[dict]]],
                      records: Iterator[pa.RecordBatch]) -> Iterator[list[dict]]:
    """`deliver` over a part at a time, committing where each acknowledged part ends (BatchProgress)."""
    committer = group_committer(settings.client_config, progress.group)
    counts: dict[tuple[str, int], dict[str, int]] = {}
    try:
        while True:
            part = _Part(records, progress.every_s)
            summaries = list(deliver(part))  # returns once the target acknowledged the whole part
            for row in (r for rows in summaries for r in rows):
                totals = counts.setdefault((row["topic"], row["partition"]), dict.fromkeys(COUNTERS, 0))
                for name in COUNTERS:
                    totals[name] += row[name]
            if part.ends:
                try:
                    committer.commit(offsets=[
                        TopicPartition(t, p, end, metadata=DeliveredCommit(progress.batch_id, counts.get(
                            (t, p), dict.fromkeys(COUNTERS, 0))).to_metadata())
                        for (t, p), end in part.ends.items()], asynchronous=False)
                except KafkaException:
                    # Only a shortcut for the run after a kill (the run records its position at its end): a
                    # refused commit (the coordinator moving, a member active in the group) must not fail the batch.
                    pass
            yield from summaries
            if part.exhausted:
                return
    finally:
        committer.close()


class _Part:
    """The records of `source` read within `seconds` (whole Arrow batches), and where they end per partition."""

    def __init__(self, source: Iterator[pa.RecordBatch], seconds: float):
        self._source, self._until = source, time.monotonic() + seconds
        self.ends: dict[tuple[str, int], int] = {}
        self.exhausted = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while time.monotonic() < self._until or not self.ends:
            batch = next(self._source, None)
            if batch is None:
                self.exhausted = True
                return
            if batch.num_rows:
                topic, partition = batch.column(0)[0].as_py(), batch.column(1)[0].as_py()
                self.ends[(topic, partition)] = batch.column(2)[-1].as_py() + 1
            yield batch
