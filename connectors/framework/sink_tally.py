"""Executor side, shared by the Kafka -> Pub/Sub sinks: one task's counts per Kafka partition, and
what becomes of a record the sink cannot deliver (Kafka Connect's error keys: fail the task,
dead-letter it, or drop it with a warning)."""

from __future__ import annotations

import collections
import dataclasses
import logging
import time

import pyarrow as pa
import pyarrow.compute as pc

from connectors.config.common import ErrorHandlingKeys
from connectors.kafka.dead_letter import DeadLetterQueue
from connectors.framework.latency import LATENCY_FIELDS, latency_counts
from connectors.errors import RecordError
from connectors.kafka.record import KafkaRecord, records_from_arrow

log = logging.getLogger(__name__)

# Below this many rows a batch is read row by row: an always-on round of a few records paid 51 us of fixed Arrow
# compute calls per round (lengths, null fills, distinct counts) against a few us in Python.
READ_IN_PYTHON_BELOW = 64


@dataclasses.dataclass
class PartitionCounts:
    records: int = 0
    published: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    failed_dropped: int = 0
    bytes: int = 0
    headers_dropped: int = 0  # headers that could not become attributes (the record itself was delivered)
    dead_letter_refused: int = 0  # refused by the dead-letter topic too, and skipped (errors.tolerance=all)


# The send-to-arrival latency buckets (latency.py) are counts too, made when the task's summary is (every record
# read by then was acknowledged).
COUNTERS = (*(f.name for f in dataclasses.fields(PartitionCounts)), *LATENCY_FIELDS)
# refusals: the first few records the dead-letter topic refused, one "topic .. partition .. offset ..: why"
# per line, so that the run's metadata names them. landed_source, landed_target: for a sink writing to Kafka, the
# source position past the last record acknowledged and the target offset past its copy (null for other sinks).
SUMMARY_SCHEMA = ("topic string, partition int, " + ", ".join(f"{name} long" for name in COUNTERS)
                  + ", refusals string, landed_source long, landed_target long")
REFUSALS_NAMED = 10


class SinkTally:
    def __init__(self, bridge_name: str, errors: ErrorHandlingKeys, kafka_client_config: dict[str, str]):
        self._bridge_name = bridge_name
        self._errors = errors
        self._kafka_client_config = kafka_client_config
        self._counts: dict[tuple[str, int], PartitionCounts] = collections.defaultdict(PartitionCounts)
        self._dlq: DeadLetterQueue | None = None  # opened on the first dead letter only
        self._refusals: dict[tuple[str, int], list[str]] = collections.defaultdict(list)
        self._sent: dict[tuple[str, int], list[pa.Array]] = collections.defaultdict(list)  # Kafka timestamps read
        self._landed: dict[tuple[str, int], tuple[int, int]] = {}

    def of(self, record: KafkaRecord) -> PartitionCounts:
        return self.partition(record.topic, record.partition)

    def partition(self, topic: str, partition: int) -> PartitionCounts:
        return self._counts[(topic, partition)]

    def read(self, record: KafkaRecord) -> None:
        counts = self.of(record)
        counts.records += 1
        counts.bytes += len(record.value or b"") + len(record.key or b"")

    def read_batch(self, batch: pa.RecordBatch) -> list[PartitionCounts]:
        """read() for a whole batch of Kafka rows, counted by column; the partitions it holds."""
        if len(batch) < READ_IN_PYTHON_BELOW:
            return self._read_rows(batch)
        sizes = pc.add(pc.fill_null(pc.binary_length(batch.column("key")), 0),
                       pc.fill_null(pc.binary_length(batch.column("value")), 0))
        topics, partitions = batch.column("topic"), batch.column("partition")
        if len(batch) and pc.count_distinct(partitions).as_py() == 1 and pc.count_distinct(topics).as_py() == 1:
            # One partition (a task's range, an always-on round's batch): no group-by, which costs more than the
            # rest of a round of a few records.
            where = (topics[0].as_py(), partitions[0].as_py())
            counts = self.partition(*where)
            counts.records += len(batch)
            counts.bytes += pc.sum(sizes).as_py() or 0
            self._sent[where].append(batch.column("timestamp_ms"))
            return [counts]
        table = pa.table({"topic": batch.column("topic"), "partition": batch.column("partition"), "size": sizes})
        touched = []
        for row in table.group_by(["topic", "partition"]).aggregate([("size", "count"), ("size", "sum")]).to_pylist():
            counts = self.partition(row["topic"], row["partition"])
            counts.records += row["size_count"]
            counts.bytes += row["size_sum"]
            touched.append(counts)
            mine = pc.and_(pc.equal(topics, row["topic"]), pc.equal(partitions, row["partition"]))
            self._sent[(row["topic"], row["partition"])].append(pc.filter(batch.column("timestamp_ms"), mine))
        return touched

    def _read_rows(self, batch: pa.RecordBatch) -> list[PartitionCounts]:
        """read_batch() of a few rows, row by row (the same counts)."""
        places = list(zip(batch.column("topic").to_pylist(), batch.column("partition").to_pylist()))
        for where, key, value in zip(places, batch.column("key").to_pylist(), batch.column("value").to_pylist()):
            counts = self.partition(*where)
            counts.records += 1
            counts.bytes += len(key or b"") + len(value or b"")
        touched = list(dict.fromkeys(places))
        stamps = batch.column("timestamp_ms")
        if len(touched) == 1:
            self._sent[touched[0]].append(stamps)
        else:
            listed = stamps.to_pylist()
            for where in touched:
                self._sent[where].append(pa.array([s for s, at in zip(listed, places) if at == where], pa.int64()))
        return [self.partition(*where) for where in touched]

    def landed(self, topic: str, partition: int, source_position: int, target_position: int) -> None:
        """A sink writing to Kafka: the record before `source_position` was acknowledged with its copy before
        `target_position` (the pair with the furthest source position is kept)."""
        if source_position > self._landed.get((topic, partition), (-1, -1))[0]:
            self._landed[(topic, partition)] = (source_position, target_position)

    def reject(self, record: KafkaRecord, stage: str, error: BaseException) -> None:
        """A record that cannot be delivered; with errors.tolerance=none it fails the task."""
        if self._errors.errors_tolerance == "none":
            raise RecordError(f"{record.where}: {error}") from error
        if self._errors.errors_deadletterqueue_topic_name:
            if self._dlq is None:
                self._dlq = DeadLetterQueue(self._errors.errors_deadletterqueue_topic_name, self._kafka_client_config,
                                            self._bridge_name, self._errors.errors_deadletterqueue_context_headers_enable)
            self._dlq.send(record, stage, error)
            self.of(record).dead_lettered += 1
        else:
            log.warning("dropping %s: %s (errors.tolerance=all, no dead-letter topic)", record.where, error)
            self.of(record).failed_dropped += 1

    def flush_dead_letters(self) -> None:
        """Waits until the DLQ acknowledged every dead letter: only then may the offsets be recorded.

        A record the dead-letter topic refuses for good (errors.tolerance=all, so it was not fatal to begin
        with) is counted, logged and named in the run's metadata, and skipped: it must not block the
        records behind it for ever."""
        if self._dlq is None:
            return
        for refused in self._dlq.flush():
            counts = self.partition(refused.topic, refused.partition)
            counts.dead_lettered -= 1
            counts.dead_letter_refused += 1
            log.warning("skipping %s: the dead-letter topic %s refused it too (errors.tolerance=all)",
                        refused, self._dlq.topic)
            named = self._refusals[(refused.topic, refused.partition)]
            if len(named) < REFUSALS_NAMED:
                named.append(str(refused))

    def summary(self) -> list[dict]:
        """The task's counts per partition, a row each (SUMMARY_SCHEMA); called once its records were delivered (or
        dead-lettered)."""
        now_ms = time.time_ns() // 1_000_000
        rows = []
        for (topic, partition), counts in self._counts.items():
            landed_source, landed_target = self._landed.get((topic, partition), (None, None))
            # vars(), not dataclasses.asdict, which deep-copies each field (a tenth of a two-record round, in cProfile).
            rows.append({"topic": topic, "partition": partition, **vars(counts),
                         **latency_counts(self._sent.get((topic, partition), []), now_ms),
                         "refusals": "\n".join(self._refusals.get((topic, partition), [])),
                         "landed_source": landed_source, "landed_target": landed_target})
        return rows


class TalliedBatch:
    """One Arrow batch of Kafka rows, read into a tally: the counts each row belongs to, and its record
    when one is needed (a dead letter, an error message). Messages still out keep it alive."""

    def __init__(self, batch: pa.RecordBatch, tally: SinkTally):
        self.batch, self.tally = batch, tally
        partitions = tally.read_batch(batch)
        self.single: PartitionCounts | None = None
        self.per_row: list[PartitionCounts] = []
        if len(partitions) == 1:  # the usual case: one Spark task per Kafka partition
            self.single = partitions[0]
        else:
            self.per_row = [tally.partition(t, p) for t, p in
                            zip(batch.column("topic").to_pylist(), batch.column("partition").to_pylist())]

    def counts(self, row: int) -> PartitionCounts:
        return self.single if self.single is not None else self.per_row[row]

    def record(self, row: int) -> KafkaRecord:
        return next(records_from_arrow(self.batch.slice(row, 1)))
