"""Driver side of the Pulsar sink: one micro-batch of the shared Kafka sink plan."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.pulsar_sink.config import PulsarSinkConfig
from connectors.pulsar_sink.write import PulsarTask, send_arrow_batches


def run_pulsar_sink_batch(spark: SparkSession, bridge_name: str, config: PulsarSinkConfig, kafka: KafkaAdmin,
                          recorded: Offsets, batch: BatchSettings, consumer_group: str) -> SinkBatchResult:
    task = PulsarTask(bridge_name, config, dead_letter_client_config(kafka, config))
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                functools.partial(send_arrow_batches, task))
