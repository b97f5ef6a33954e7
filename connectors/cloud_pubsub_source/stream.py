"""Driver side of an always-on Cloud Pub/Sub source (continuous mode): one long-running Spark job of pull tasks
(stream_task.py), and what they reported, read back as the bridge's counts. Pub/Sub keeps the position (what is
acked), so a restarted job simply pulls again; the job, its lease and its restarts are a LeasedJob's. Under
exactly.once.support=required the tasks commit records and message ids in Kafka transactions, with the positions
topic and slots a micro-batch uses (exactly_once.stream_in_transactions).
"""

from __future__ import annotations

import functools
import math
import time
from typing import TYPE_CHECKING

from confluent_kafka import TopicPartition

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.batch import SourceBatchResult, check_target_topic
from connectors.cloud_pubsub_source.exactly_once import ExactlyOnceTask
from connectors.cloud_pubsub_source.report import source_report
from connectors.cloud_pubsub_source.stream_task import stream_pull_and_deliver
from connectors.cloud_pubsub_source.write import SourceTask
from connectors.kafka.admin import KafkaAdmin
from connectors.framework.leased_job import LeasedJob
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.stream_lease import source_lease_place
from connectors.framework.stream_report import ReportingTaskSettings, new_reports
from connectors.kafka.transactions import PositionsTopic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connectors.plugin import Bridge

_TOTALS = ("pulled", "acked", "dropped")  # the rest is per Kafka partition


class CloudPubSubSourceStream(LeasedJob):
    """A running always-on Cloud Pub/Sub source; `progress()` is what its tasks reported since the last call."""

    def __init__(self, spark: SparkSession, connection: PubSubConnection, kafka: KafkaAdmin, bridge: Bridge):
        super().__init__(spark, bridge, kafka.connection.librdkafka_config())
        self._connection, self._kafka = connection, kafka
        config = bridge.config
        with kafka_outages_named(kafka.connection.bootstrap_servers, f"starting the stream of {bridge.name}"):
            check_target_topic(kafka, config)
        self._where = source_lease_place(config.kafka_topic)
        # Streaming pull: cps.streamingPull.parallelStreams streams, one per task, as a micro-batch has.
        self._slots = (config.streaming_pull_parallel_streams if config.streaming_pull_enabled
                       else bridge.continuous.stream_tasks)
        self._reported_at = time.monotonic()
        self._start()

    def _start(self) -> None:
        bridge, config = self._bridge, self._bridge.config
        self._seen: dict[int, dict] = {}  # each slot's last report read, of this job
        client_config = self._kafka.connection.librdkafka_config()
        task = SourceTask(config, self._connection, client_config, math.inf, bridge.batch.outage_timeout_seconds)
        if config.exactly_once:  # as in a micro-batch: the same topic and slots, so a bridge can switch modes
            positions = PositionsTopic(config.positions_topic_name(bridge.name), client_config)
            with kafka_outages_named(self._kafka.connection.bootstrap_servers,
                                     f"preparing the positions topic of {bridge.name}"):
                task = ExactlyOnceTask(task, positions, positions.ensure(self._kafka, self._slots))
        stream_id = self._new_stream_id()
        settings = ReportingTaskSettings(task, bridge.consumer_group, stream_id, self._where,
                                        report_every_s=min(1.0, bridge.continuous.commit_interval_ms / 2000),
                                        deadline=self.deadline, host_lease=self.host_lease,
                                        run_address=self.run_address)
        self._launch(functools.partial(stream_pull_and_deliver, settings), self._slots, TopicPartition(*self._where))

    def progress(self):
        started = self._reported_at
        result = SourceBatchResult()
        with kafka_outages_named(self._kafka.connection.bootstrap_servers,
                                 f"reading the progress of {self._bridge.name}"):
            self._absorb_reports(result)
            restarted = self._restart_after_failure()
        self._reported_at = time.monotonic()
        result.duration_s = self._reported_at - started
        return self._with_stream_facts(source_report(result), restarted)

    def _absorb_reports(self, result: SourceBatchResult) -> None:
        """Adds what each task reported since the last look to `result`."""
        for seen, counts in new_reports(self._kafka, self._bridge.consumer_group, self._slots, self._where,
                                        self.stream_id, self._seen):
            self._progress_made()
            for name in _TOTALS:
                setattr(result, name, getattr(result, name) + counts.get(name, 0) - seen.get(name, 0))
            before = seen.get("partitions", {})
            for key, (written, size) in counts.get("partitions", {}).items():
                was_written, was_size = before.get(key, (0, 0))
                if written > was_written:
                    result.per_partition[key] = result.per_partition.get(key, 0) + written - was_written
                    result.written += written - was_written
                result.bytes += size - was_size
