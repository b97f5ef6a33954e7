"""Driver side of the Pub/Sub Lite sink: one micro-batch of the shared Kafka sink plan."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from connectors.config.bridges_file import BatchSettings
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.pubsublite.clients import LiteConnection
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.write import LiteSinkTask, publish_arrow_batches


def run_lite_sink_batch(
    spark: SparkSession,
    bridge_name: str,
    config: PubSubLiteSinkConfig,
    connection: LiteConnection,
    kafka: KafkaAdmin,
    recorded: Offsets,
    batch: BatchSettings,
    consumer_group: str,
) -> SinkBatchResult:
    task = LiteSinkTask(bridge_name, config, connection, kafka.connection.librdkafka_config())
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                functools.partial(publish_arrow_batches, task))
