"""Driver side of the Pulsar sink: one micro-batch of the shared Kafka sink plan."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.kafka.spark_read import Deliver
from connectors.pulsar_sink.config import PulsarSinkConfig
from connectors.pulsar_sink.write import PulsarTask, send_arrow_batches


def deliver_to_pulsar(bridge_name: str, config: PulsarSinkConfig, kafka: KafkaAdmin) -> Deliver:
    """The executors' delivery to the bridge's Pulsar topics."""
    return functools.partial(send_arrow_batches, PulsarTask(bridge_name, config, dead_letter_client_config(kafka, config)))


def run_pulsar_sink_batch(spark: SparkSession, bridge_name: str, config: PulsarSinkConfig, kafka: KafkaAdmin,
                          recorded: Offsets, batch: BatchSettings, consumer_group: str) -> SinkBatchResult:
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                deliver_to_pulsar(bridge_name, config, kafka))
