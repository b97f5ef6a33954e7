"""Driver side of the Cloud Pub/Sub sink: one micro-batch of the shared Kafka sink plan."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.write import SinkTask, publish_arrow_batches
from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.kafka.spark_read import Deliver

__all__ = ["SinkBatchResult", "deliver_to_pubsub", "run_sink_batch"]


def deliver_to_pubsub(bridge_name: str, config: CloudPubSubSinkConfig, connection: PubSubConnection, kafka: KafkaAdmin,
                      outage_timeout_s: int) -> Deliver:
    """The executors' delivery of Kafka records to the bridge's Pub/Sub topic (write.py)."""
    task = SinkTask(bridge_name, config, connection, dead_letter_client_config(kafka, config), outage_timeout_s)
    return functools.partial(publish_arrow_batches, task)


def run_sink_batch(
    spark: SparkSession,
    bridge_name: str,
    config: CloudPubSubSinkConfig,
    connection: PubSubConnection,
    kafka: KafkaAdmin,
    recorded: Offsets,
    batch: BatchSettings,
    consumer_group: str,
) -> SinkBatchResult:
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                deliver_to_pubsub(bridge_name, config, connection, kafka, batch.outage_timeout_seconds))
