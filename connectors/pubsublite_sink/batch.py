"""Driver side of the Pub/Sub Lite sink: one micro-batch of the shared Kafka sink plan."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.kafka.spark_read import Deliver
from connectors.outage import lite_outages_named
from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.write import LiteSinkTask, publish_arrow_batches


class LitePartitionsTooFew(ValueError):
    pass


def deliver_to_lite(bridge_name: str, config: PubSubLiteSinkConfig, connection: LiteConnection, kafka: KafkaAdmin,
                    outage_timeout_s: int) -> Deliver:
    """The executors' delivery of Kafka records to the bridge's Lite topics (write.py), with each Lite topic's
    partition count read once (one topic, or one per Kafka topic with ${topic})."""
    kafka_partitions = kafka.partitions(config.topic_list() or None, config.topics_regex)
    lite_partitions: dict[str, int] = {}
    for kafka_topic in sorted(kafka_partitions) or [""]:
        topic = config.topic_path(kafka_topic)
        if str(topic) not in lite_partitions:
            with lite_outages_named(connection, topic.location, f"reading the partition count of {topic}"):
                lite_partitions[str(topic)] = connection.admin(region_of(topic.location)).get_topic_partition_count(topic)
        if config.pubsublite_ordering_mode == "KAFKA" and kafka_topic:
            check_kafka_mode_partitions({kafka_topic: kafka_partitions[kafka_topic]}, lite_partitions[str(topic)],
                                        str(topic))
    task = LiteSinkTask(bridge_name, config, connection, dead_letter_client_config(kafka, config), lite_partitions,
                        outage_timeout_s)
    return functools.partial(publish_arrow_batches, task)


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
    deliver = deliver_to_lite(bridge_name, config, connection, kafka, batch.outage_timeout_seconds)
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group, deliver)


def check_kafka_mode_partitions(kafka_partitions: dict[str, list[int]], lite_partitions: int, lite_topic: str) -> None:
    """pubsublite.ordering.mode=KAFKA maps Kafka partition n to Lite partition n: fail before moving anything
    when a Kafka topic has more partitions than the Lite topic, naming both counts."""
    for kafka_topic, partitions in sorted(kafka_partitions.items()):
        if len(partitions) > lite_partitions:
            raise LitePartitionsTooFew(
                f"Kafka topic {kafka_topic} has {len(partitions)} partitions but Pub/Sub Lite topic {lite_topic} has "
                f"{lite_partitions}; pubsublite.ordering.mode=KAFKA needs at least as many Lite partitions")
