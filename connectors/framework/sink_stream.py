"""Driver side of an always-on Kafka sink (continuous mode): one long-running Spark job whose tasks each hold a
consumer on their share of the partitions (stream_task.py), and the progress those tasks commit to the bridge's
Kafka Connect group, read back as the bridge's position and counts.

The job, its lease and its restarts are a LeasedJob's (leased_job.py). When the topics gain a partition the job is
stopped and started again from the position reached, with the new partition assigned, and the sink is prepared again
first (its driver-side checks, as Kafka Connect starts a sink connector again on a reconfiguration: a Kafka target
must still have as many partitions as its source): a check that fails ends the stream with its own message, its last
commits recorded, before anything is sent to the new partition.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Callable

from confluent_kafka import TopicPartition

from connectors.kafka.admin import BatchPlan, KafkaAdmin, Offsets
from connectors.framework.delivered import DeliveredCommit, Landed, Landings, past_delivered
from connectors.framework.leased_job import LeasedJob
from connectors.kafka.outages import kafka_outages_named
from connectors.kafka.range_reader import ReaderSettings
from connectors.framework.sink_batch import SinkBatchResult
from connectors.framework.sink_tally import COUNTERS
from connectors.framework.spark_read import Deliver
from connectors.framework.stream_task import StreamSettings, stream_partitions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connectors.plugin import BatchReport, Bridge


def _behind(position: Offsets, ends: Offsets) -> Offsets:
    """The partitions whose end is past the position, at the position: where a record may wait for the stream."""
    return {t: {p: o for p, o in ps.items() if ends.get(t, {}).get(p, o) > o} for t, ps in position.items()}


def _tally_line(totals: dict[str, int], behind: int) -> str:
    return f"{totals['records']} records read, {totals['published']} published; {behind} behind"


@dataclasses.dataclass(frozen=True)
class StreamCounts:
    """What a sink stream's tasks count (the names of their summary rows' counts, in the order their commits carry
    them) and how a progress read's sums become its report and one line: the Kafka sinks' tally (sink_tally.py) by
    default; a sink with a delivery of its own (the archive's files) names its own."""

    counters: tuple[str, ...] = COUNTERS
    report: Callable[[SinkBatchResult], BatchReport] | None = None  # None: plugin_parts.sink_report
    line: Callable[[dict[str, int], int], str] = _tally_line  # the totals and the records behind


@dataclasses.dataclass(frozen=True)
class Rounds:
    """How a sink stream's tasks gather a round (stream_task.py): at most `linger_s` after its first record, at most
    `records` of them."""

    linger_s: float
    records: int = 10_000


class KafkaSinkStream(LeasedJob):
    """A running always-on Kafka sink; `progress()` is what its tasks committed since the last call."""

    def __init__(self, spark: SparkSession, kafka: KafkaAdmin, bridge: Bridge, prepare: Callable[[], Deliver],
                 rounds: Rounds, recorded: Offsets, landings: Landings | None = None,
                 counts: StreamCounts = StreamCounts(), resume: Callable[[Offsets], Offsets] | None = None):
        super().__init__(spark, bridge, kafka.connection.librdkafka_config())
        self._kafka, self._prepare, self._rounds, self._landings = kafka, prepare, rounds, landings
        self._resume = resume
        self._counts = counts
        self._deliver = prepare()
        self._landed_unreported: dict[tuple[str, int], Landed] = {}
        self._reported_at = time.monotonic()
        self._skipped_unreported: dict[str, int] = {}
        self._seen: dict[tuple[str, int], dict[str, int]] = {}  # counts of the stream's commits read so far
        self._position: Offsets = recorded
        self._start()

    def _start(self) -> None:
        config, kafka = self._bridge.config, self._kafka
        with kafka_outages_named(kafka.connection.bootstrap_servers, f"starting the stream of {self._bridge.name}"):
            self._partitions = kafka.partitions(config.topic_list() or None, config.topics_regex)
            # A plan of no records: where each partition starts (recorded, committed or initial offsets), and what
            # retention deleted before the bridge got to it.
            plan = kafka.plan_batch(self._partitions, self._position, 0, self._bridge.batch.initial_offsets,
                                    self._bridge.consumer_group, config.isolation_level)
            # A commit past the recorded position was delivered by a run killed before it could record it.
            self._position = past_delivered(kafka, self._bridge.consumer_group, self._partitions, plan.next_offsets)
        if self._resume is not None:
            # The sink's own record of what it holds (the archive's cursors) is ahead of the commits when a task
            # delivered a round and failed before committing it: going on from there writes no round twice.
            self._position = self._resume(self._position)
        self._skipped_unreported.update(plan.skipped_by_retention)
        self._seen = {}
        if self._landings is not None:
            self._landings.started(self._position)
        starts = sorted((t, p, o) for t, ps in self._position.items() for p, o in ps.items())
        tasks = max(1, min(self._bridge.continuous.stream_tasks, len(starts)))
        assignments = [starts[i::tasks] for i in range(tasks)]
        connection = kafka.connection
        stream_id = self._new_stream_id()
        settings = StreamSettings(
            reader=ReaderSettings({**connection.librdkafka_config(), "isolation.level": config.isolation_level},
                                  connection.bootstrap_servers, self._bridge.batch.outage_timeout_seconds,
                                  config.reads_kafka_headers),
            group=self._bridge.consumer_group, stream_id=stream_id, linger_s=self._rounds.linger_s,
            lease_partition=(starts[0][0], starts[0][1]), round_records=self._rounds.records,
            commit_every_s=min(1.0, self._bridge.continuous.commit_interval_ms / 2000), deadline=self.deadline,
            host_lease=self.host_lease, run_address=self.run_address, counters=self._counts.counters)
        self._launch(functools.partial(stream_partitions, settings, assignments, self._deliver), tasks,
                     TopicPartition(starts[0][0], starts[0][1]))

    # --- the Stream protocol ---------------------------------------------------------------------------
    def progress(self):
        from connectors.framework.plugin_parts import sink_report

        config, kafka = self._bridge.config, self._kafka
        started = self._reported_at
        result = SinkBatchResult(plan=BatchPlan([], {}, {}), duration_s=0.0,
                                 totals=dict.fromkeys(self._counts.counters, 0))
        with kafka_outages_named(kafka.connection.bootstrap_servers, f"reading the progress of {self._bridge.name}"):
            self._absorb_commits(result)
            ends = kafka.end_offsets(self._partitions, config.isolation_level)
            partitions_now = kafka.partitions(config.topic_list() or None, config.topics_regex)
            if partitions_now != self._partitions and self._running:
                # A partition came (or went): the job starts again with it, from where it got to.
                self._deliver = self._prepare()  # a check that fails here leaves the running job to stop()
                self._start_again(lambda: self._absorb_commits(result))
            restarted = self._restart_after_failure()
            result.plan = BatchPlan([], {t: dict(ps) for t, ps in self._position.items()}, ends,
                                    dict(self._skipped_unreported))
            restarted = restarted or self._restart_if_stalled(
                result.plan.lag_after(), lambda: kafka.records_at(_behind(result.plan.next_offsets, ends),
                                                                  config.isolation_level))
        self._skipped_unreported = {}
        self._reported_at = time.monotonic()
        result.duration_s = self._reported_at - started
        report = (self._counts.report or sink_report)(result)
        if self._landings is not None:
            report = self._report_landed(report)
        return self._with_stream_facts(report, restarted, self._counts.line(result.totals, result.plan.lag_after()))

    def _report_landed(self, report: BatchReport) -> BatchReport:
        """Where the records delivered since the last look landed, to the sink's Landings; the counts it returns are
        added to the progress report (and add up over a commit interval)."""
        counts, warnings = self._landings.landed(self._landed_unreported)
        self._landed_unreported = {}
        return dataclasses.replace(report, values={**report.values, **counts}, counters=(*report.counters, *counts),
                                   warnings=(*report.warnings, *warnings))

    def _absorb_commits(self, result: SinkBatchResult) -> None:
        """Adds the stream's commits since the last look to `result` and moves the position up to them."""
        for (topic, partition), (offset, metadata) in self._kafka.commits(self._bridge.consumer_group,
                                                                          self._partitions).items():
            commit = DeliveredCommit.from_metadata(metadata, self._counts.counters)
            if commit is None or commit.writer_id != self.stream_id:
                continue  # not this stream's: an earlier run's, or Kafka Connect's own
            if offset > self._position[topic][partition]:
                self._position[topic][partition] = offset
            if commit.landed is not None:
                self._landed_unreported[(topic, partition)] = commit.landed
            counters = self._counts.counters
            seen = self._seen.get((topic, partition), dict.fromkeys(counters, 0))
            counts = {name: commit.counts[name] - seen[name] for name in counters}
            if commit.counts != seen:
                self._progress_made()
            self._seen[(topic, partition)] = commit.counts
            totals = result.per_partition.setdefault(f"{topic}-{partition}", dict.fromkeys(counters, 0))
            for name in counters:
                totals[name] += counts[name]
                result.totals[name] += counts[name]


def open_kafka_sink_stream(systems, bridge: Bridge, position: Offsets | None, prepare: Callable[[], Deliver],
                           rounds: Rounds, landings: Landings | None = None,
                           counts: StreamCounts = StreamCounts(),
                           resume: Callable[[Offsets], Offsets] | None = None) -> KafkaSinkStream:
    """A Kafka sink's always-on delivery, run in the run's Spark session (sink_plugin.KafkaSink.open_stream, the
    archive's plugin); `prepare` is the sink's driver-side preparation, run at its open and again when its partitions
    change; `resume`, if given, moves the position to where the sink itself says it got to, at every (re)start."""
    with systems.spark.batch_session(bridge.name) as spark:
        return KafkaSinkStream(spark, systems.kafka.admin(), bridge, prepare, rounds, position or {}, landings, counts,
                               resume)
