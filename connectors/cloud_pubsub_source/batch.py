"""Driver side of the source: run parallel pull tasks on Spark and report what they moved."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.write import SUMMARY_SCHEMA, SourceTask, pull_and_deliver
from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin


@dataclass
class SourceBatchResult:
    duration_s: float = 0.0
    pulled: int = 0
    written: int = 0
    acked: int = 0
    dropped: int = 0
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
) -> SourceBatchResult:
    """Pull up to batch.max_records messages in batch.parallelism Spark tasks and deliver them."""
    started = time.monotonic()
    check_target_topic(kafka, config)
    # Streaming pull: one stream per Spark task, cps.streamingPull.parallelStreams of them.
    tasks = config.streaming_pull_parallel_streams if config.streaming_pull_enabled else batch.parallelism
    task = SourceTask(config, connection, kafka.connection.librdkafka_config(), math.ceil(batch.max_records / tasks),
                      batch.outage_timeout_seconds, batch.max_seconds)
    slots = spark.range(0, tasks, 1, tasks).selectExpr("CAST(id AS INT) AS slot")
    rows = slots.mapInArrow(functools.partial(pull_and_deliver, task), SUMMARY_SCHEMA).collect()
    result = SourceBatchResult()
    for row in rows:
        if row["kafka_partition"] < 0:
            result.pulled += row["pulled"]
            result.acked += row["acked"]
            result.dropped += row["dropped"]
        else:
            key = str(row["kafka_partition"])
            result.per_partition[key] = result.per_partition.get(key, 0) + row["written"]
            result.written += row["written"]
            result.bytes += row["bytes"]
    result.duration_s = time.monotonic() - started
    return result
