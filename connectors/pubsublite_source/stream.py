"""Driver side of an always-on Pub/Sub Lite source (continuous mode): one long-running Spark job whose tasks each
hold a Subscribe stream per Lite partition of their share (stream_task.py), and the cursors and counts they
reported, read back as the bridge's position and counts. The job, its lease and its restarts are a LeasedJob's;
a partition added to the Lite topic restarts the job with it. To rewind such a bridge, seek its subscription too.
Under exactly.once.support=required the tasks commit records and cursors in Kafka transactions, with the positions
topic and slots a micro-batch uses (exactly_once.StreamTransactions).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from confluent_kafka import TopicPartition

from connectors.kafka.admin import KafkaAdmin
from connectors.framework.leased_job import LeasedJob
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.stream_lease import source_lease_place
from connectors.framework.stream_report import ReportingTaskSettings, new_reports
from connectors.kafka.transactions import PositionsTopic
from connectors.outage import lite_outages_named
from connectors.pubsublite.clients import LiteConnection
from connectors.pubsublite_source.batch import (
    LiteSourceBatchResult, committed_cursors, head_cursors, lite_positions, lite_topic_of, target_partition_count,
)
from connectors.pubsublite_source.report import lite_source_report
from connectors.pubsublite_source.stream_task import stream_lite_partitions
from connectors.pubsublite_source.write import LiteSourceTask

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connectors.plugin import Bridge


class LiteSourceStream(LeasedJob):
    """A running always-on Lite source; `progress()` is what its tasks reported since the last call."""

    def __init__(self, spark: SparkSession, connection: LiteConnection, kafka: KafkaAdmin, bridge: Bridge,
                 recorded: dict[int, int]):
        super().__init__(spark, bridge, kafka.connection.librdkafka_config())
        self._connection, self._kafka = connection, kafka
        config = bridge.config
        with kafka_outages_named(kafka.connection.bootstrap_servers, f"starting the stream of {bridge.name}"):
            self._kafka_partition_count = target_partition_count(kafka, config)
        self._where = source_lease_place(config.kafka_topic)
        self._position: dict[int, int] = dict(recorded)
        self._reported_at = time.monotonic()
        self._start()

    def _lite(self, doing: str):
        subscription = self._bridge.config.subscription_path()
        return lite_outages_named(self._connection, subscription.location, f"{doing} of {subscription}")

    def _start(self) -> None:
        bridge, config = self._bridge, self._bridge.config
        with self._lite("reading the cursors"):
            starts, _ = lite_positions(self._connection, config, self._position)
            self._topic, self._partition_count = lite_topic_of(self._connection, config)
            # A cursor committed past the recorded position was acknowledged by Kafka already (a stream's or a
            # batch's, of a run killed before it could record it): starting there re-sends nothing it moved.
            for partition, cursor in committed_cursors(self._connection, config).items():
                if cursor > starts.get(partition, cursor):
                    starts[partition] = cursor
        self._position = starts
        self._seen: dict[int, dict] = {}
        self._slots = max(1, min(bridge.continuous.stream_tasks, len(starts)))
        ordered = sorted(starts.items())
        assignments = [ordered[i::self._slots] for i in range(self._slots)]
        client_config = self._kafka.connection.librdkafka_config()
        positions = None
        if config.exactly_once:  # as in a micro-batch: the same topic and slots, so a bridge can switch modes
            positions = PositionsTopic(config.positions_topic_name(bridge.name), client_config)
            with kafka_outages_named(self._kafka.connection.bootstrap_servers,
                                     f"preparing the positions topic of {bridge.name}"):
                positions.ensure(self._kafka, self._partition_count)
        task = LiteSourceTask(config, self._connection, client_config, self._kafka_partition_count,
                              bridge.batch.outage_timeout_seconds, positions)
        stream_id = self._new_stream_id()
        settings = ReportingTaskSettings(task, bridge.consumer_group, stream_id, self._where,
                                      report_every_s=min(1.0, bridge.continuous.commit_interval_ms / 2000),
                                      deadline=self.deadline, host_lease=self.host_lease, run_address=self.run_address)
        self._launch(functools.partial(stream_lite_partitions, settings, assignments), self._slots,
                     TopicPartition(*self._where))

    def progress(self):
        started = self._reported_at
        result = LiteSourceBatchResult(start_cursors={}, head_cursors={})
        with kafka_outages_named(self._kafka.connection.bootstrap_servers,
                                 f"reading the progress of {self._bridge.name}"):
            self._absorb_reports(result)
        with self._lite("reading the head cursors"):
            _, partition_count = lite_topic_of(self._connection, self._bridge.config)
            if partition_count != self._partition_count and self._running:
                # A partition came: the job starts again with it, from where it got to.
                def take_last_reports() -> None:
                    self._absorb_reports(result)  # what the stopped job reported last
                    self._failure = None  # the interrupt's own error

                self._start_again(take_last_reports)
            result.head_cursors = head_cursors(self._connection, self._topic, self._partition_count)
        restarted = self._restart_after_failure()
        # After a restart for a new partition, the position (and the heads) have it too.
        result.start_cursors = result.next_cursors = dict(self._position)
        self._reported_at = time.monotonic()
        result.duration_s = self._reported_at - started
        report = lite_source_report(result)
        line = f"{report.moved} messages moved to Kafka; {result.backlog_after} behind"
        return self._with_stream_facts(report, restarted, line)

    def _absorb_reports(self, result: LiteSourceBatchResult) -> None:
        """Adds what each task reported since the last look to `result`, and moves the position up to it."""
        for seen, counts in new_reports(self._kafka, self._bridge.consumer_group, self._slots, self._where,
                                        self.stream_id, self._seen):
            self._progress_made()
            for name in ("messages", "dropped", "filtered", "bytes"):
                setattr(result, name, getattr(result, name) + counts.get(name, 0) - seen.get(name, 0))
            for lite_partition, lost in counts.get("lost", {}).items():
                moved = lost - seen.get("lost", {}).get(lite_partition, 0)
                if moved:
                    result.lost_to_retention[int(lite_partition)] = moved
            for lite_partition, cursor in counts.get("cursors", {}).items():
                if cursor > self._position.get(int(lite_partition), -1):
                    self._position[int(lite_partition)] = cursor
