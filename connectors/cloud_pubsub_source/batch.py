"""Driver side of the source: run parallel pull tasks on Spark and report what they moved."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.exactly_once import ExactlyOnceTask, pull_and_deliver_in_transactions
from connectors.cloud_pubsub_source.write import SUMMARY_SCHEMA, SourceTask, pull_and_deliver
from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin
from connectors.framework.batch_lease import held_batch_lease
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.stream_lease import source_lease_place
from connectors.kafka.transactions import PositionsTopic


@dataclass
class SourceBatchResult:
    duration_s: float = 0.0
    pulled: int = 0
    written: int = 0
    acked: int = 0
    dropped: int = 0
    recognized: int = 0  # exactly once: pulled again after their transaction committed, acked without writing
    bytes: int = 0
    per_partition: dict[str, int] = field(default_factory=dict)  # Kafka partition -> records written

    @property
    def records_per_second(self) -> float:
        return self.written / self.duration_s if self.duration_s > 0 else 0.0


def check_target_topic(kafka: KafkaAdmin, config: CloudPubSubSourceConfig) -> None:
    """Raises naming what is wrong when kafka.topic is missing or has fewer partitions than the scheme writes to."""
    partitions = kafka.partitions([config.kafka_topic]).get(config.kafka_topic)
    if partitions is None:
        raise ValueError(f"kafka.topic {config.kafka_topic!r} does not exist")
    if config.kafka_partition_scheme != "kafka_partitioner" and len(partitions) < config.kafka_partition_count:
        raise ValueError(
            f"kafka.partition.count is {config.kafka_partition_count} but topic {config.kafka_topic!r} "
            f"has {len(partitions)} partitions"
        )


def run_source_batch(
    spark: SparkSession,
    config: CloudPubSubSourceConfig,
    connection: PubSubConnection,
    kafka: KafkaAdmin,
    batch: BatchSettings,
    bridge_name: str,
    consumer_group: str,
) -> SourceBatchResult:
    """Pull up to batch.max_records messages in batch.parallelism Spark tasks and deliver them, the tasks held on a
    lease in `consumer_group`'s lease group (batch_lease.py; at kafka.topic's partition 0, as the bridge's stream)."""
    started = time.monotonic()
    with kafka_outages_named(kafka.connection.bootstrap_servers, f"checking kafka.topic {config.kafka_topic}"):
        check_target_topic(kafka, config)
    client_config = kafka.connection.librdkafka_config()
    # Streaming pull: one stream per Spark task, cps.streamingPull.parallelStreams of them.
    tasks = config.streaming_pull_parallel_streams if config.streaming_pull_enabled else batch.parallelism
    positions = slots_in_topic = None
    if config.exactly_once:
        positions = PositionsTopic(config.positions_topic_name(bridge_name), client_config)
        # A partition per pull slot; the records of slots beyond `tasks` (from a run with more) are still read.
        slots_in_topic = positions.ensure(kafka, tasks)
    with held_batch_lease(client_config, consumer_group, source_lease_place(config.kafka_topic)) as lease:
        task = SourceTask(config, connection, client_config, math.ceil(batch.max_records / tasks),
                          batch.outage_timeout_seconds, batch.max_seconds, lease)
        deliver = functools.partial(pull_and_deliver, task)
        if positions is not None:
            deliver = functools.partial(pull_and_deliver_in_transactions,
                                        ExactlyOnceTask(task, positions, slots_in_topic))
        slots = spark.range(0, tasks, 1, tasks).selectExpr("CAST(id AS INT) AS slot")
        rows = slots.mapInArrow(deliver, SUMMARY_SCHEMA).collect()
    result = SourceBatchResult()
    for row in rows:
        if row["kafka_partition"] < 0:
            result.pulled += row["pulled"]
            result.acked += row["acked"]
            result.dropped += row["dropped"]
            result.recognized += row["recognized"]
        else:
            key = str(row["kafka_partition"])
            result.per_partition[key] = result.per_partition.get(key, 0) + row["written"]
            result.written += row["written"]
            result.bytes += row["bytes"]
    result.duration_s = time.monotonic() - started
    return result
