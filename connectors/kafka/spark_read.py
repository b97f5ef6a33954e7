"""Driver side of every Kafka-reading bridge: one Spark task per planned offset range, each reading its range
in the Python worker (range_reader.py) and handing the records straight to the connector's delivery.

The run beats a lease for the batch (stream_lease.py, as an always-on stream's run does) and its tasks stop reading
once it lapses: a killed run's batch stops within about a second on either engine. Without it, a Spark Connect
server went on with a dead client's job until the run's watchdog interrupted it, seconds later.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa
from confluent_kafka import KafkaException, TopicPartition
from pyspark.sql import Row, SparkSession

from connectors.errors import BatchError
from connectors.kafka.admin import PartitionRange
from connectors.kafka.connection import KafkaConnection, group_committer
from connectors.kafka.delivered import DeliveredCommit
from connectors.kafka.range_reader import ReaderSettings, read_ranges
from connectors.kafka.sink_tally import COUNTERS
from connectors.kafka.stream_lease import LeaseHolder, LeaseWatcher

__all__ = ["BatchProgress", "Deliver", "deliver_offset_ranges", "split_ranges"]

# Takes a task's records (Arrow batches of range_reader.RECORD_SCHEMA) and yields its summary rows, only once
# the destination has acknowledged every record it was handed.
Deliver = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class BatchProgress:
    """A batch's tasks hand their records to the delivery a part at a time (`every_s` of reading each) and commit
    where each acknowledged part ends to the bridge's Kafka group, as the always-on streams do (stream_task.py):
    a run killed mid-batch is followed by one that starts there, instead of at the batch's start."""

    group: str
    batch_id: str
    every_s: float


@dataclass(frozen=True)
class BatchLease:
    """Where a batch's run beats its lease: the lease group of the bridge's consumer group, at the batch's first
    partition (an always-on stream's place too, so whichever started last fences the other's tasks)."""

    group: str
    where: tuple[str, int]
    batch_id: str


# How long after Kafka answers again a batch's task waits for the run's beat before it counts the lapse.
_LEASE_OUTAGE_GRACE_S = 5.0


class LeaseLapsed(BatchError):
    """A batch's task stopped because its run no longer holds the batch's lease (killed, or another run took the
    bridge); what it delivered is committed to the bridge's group, for the next run to start from."""


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
    lease = BatchLease(consumer_group, (ranges[0].topic, ranges[0].partition), uuid.uuid4().hex[:16])
    holder = LeaseHolder(connection.librdkafka_config(), lease.group, TopicPartition(*lease.where), lease.batch_id)
    try:
        tasks = spark.range(0, len(pieces), 1, len(pieces))
        return tasks.mapInArrow(functools.partial(_read_and_deliver, settings, pieces, deliver, progress, lease),
                                summary_schema).collect()
    finally:
        # Tasks left behind by a failure (or an interrupt) stop at once rather than at the lapse; with Kafka away they
        # stop at the lapse (stop() closes the holder either way).
        with contextlib.suppress(KafkaException):
            holder.stop()


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
                      progress: BatchProgress | None, lease: BatchLease,
                      task_ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    ids = [i for batch in task_ids for i in batch.column(0).to_pylist()]
    mine = [pieces[i][0] for i in ids]
    if not mine:
        return
    watcher = LeaseWatcher(settings.client_config, lease.group, TopicPartition(*lease.where), lease.batch_id,
                           outage_grace_s=_LEASE_OUTAGE_GRACE_S)
    try:
        records = _WhileLeased(read_ranges(settings, mine), watcher)
        # Progress is committed only by a partition's first piece: a later piece's end, committed while an earlier
        # piece is still on its way, would skip that piece's rest after a kill.
        if progress is None or not all(pieces[i][1] for i in ids):
            yield from deliver(iter(records))
        else:
            yield from _deliver_in_parts(settings, progress, deliver, records)
        if records.lapsed:
            # Whatever was handed to the delivery has been acknowledged (and committed, with progress): failing
            # the task keeps a run that is still there from recording the batch's end as delivered.
            raise LeaseLapsed(f"reading {', '.join(f'{r.topic}-{r.partition}' for r in mine)} stopped: "
                              f"{watcher.why_not}")
    finally:
        watcher.close()


class _WhileLeased:
    """The records of `source` while the run holds the batch's lease (looked at between Arrow batches)."""

    def __init__(self, source: Iterator[pa.RecordBatch], watcher: LeaseWatcher):
        self._source, self._watcher = source, watcher
        self.lapsed = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self._source:
            yield batch
            if not self._watcher.holds():
                self.lapsed = True
                return


def _deliver_in_parts(settings: ReaderSettings, progress: BatchProgress, deliver: Deliver,
                      leased: _WhileLeased) -> Iterator[pa.RecordBatch]:
    """`deliver` over a part at a time, committing where each acknowledged part ends (BatchProgress)."""
    records = iter(leased)
    committer = group_committer(settings.client_config, progress.group)
    counts: dict[tuple[str, int], dict[str, int]] = {}
    try:
        while True:
            part = _Part(records, progress.every_s)
            summaries = list(deliver(part))  # returns once the target acknowledged the whole part
            for row in (r for batch in summaries for r in batch.to_pylist()):
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
