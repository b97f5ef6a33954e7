"""Driver side of the Kafka -> Kafka sink: the target topics made ready, then one micro-batch of the shared
Kafka sink plan."""

from __future__ import annotations

import functools
import re

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.errors import BatchError
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES, dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.kafka_sink.write import ReplicaTask, produce_arrow_batches
from connectors.outage import kafka_outages_named


def prepare_targets(config: KafkaSinkConfig, source: KafkaAdmin, target: KafkaAdmin) -> int:
    """Each source topic's target exists with enough partitions (created like its source when allowed);
    the largest record any of them may carry."""
    sources = source.partitions(config.topic_list() or None, config.topics_regex)
    if not sources:
        return 1_048_588
    limits = source.topic_max_message_bytes(list(sources))
    wanted = {config.target_topic(topic): topic for topic in sources}
    with kafka_outages_named(config.target_bootstrap_servers, "looking up the target topics"):
        existing = target.partitions(None, "|".join(re.escape(name) for name in wanted))
        for name, topic in wanted.items():
            count = len(sources[topic])
            if name not in existing:
                if not config.target_topic_create:
                    raise BatchError(f"target topic {name} does not exist on {config.target_bootstrap_servers} "
                                     "(target.topic.create=false)")
                target.create_topic(name, count, {"max.message.bytes": str(limits[topic])},
                                    config.target_topic_replication_factor)
            elif config.target_partition == "same" and len(existing[name]) < max(sources[topic]) + 1:
                raise BatchError(f"target topic {name} has {len(existing[name])} partitions, source topic {topic} "
                                 f"has {count}: target.partition=same needs as many (or target.partition=key)")
    return max(limits.values())


def run_replica_batch(spark: SparkSession, bridge_name: str, config: KafkaSinkConfig, kafka: KafkaAdmin,
                      recorded: Offsets, batch: BatchSettings, consumer_group: str) -> SinkBatchResult:
    largest = prepare_targets(config, kafka, KafkaAdmin(config.target_connection()))
    task = ReplicaTask(bridge_name, config, dead_letter_client_config(kafka, config),
                       min(largest + HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES), batch.outage_timeout_seconds)
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                functools.partial(produce_arrow_batches, task))
