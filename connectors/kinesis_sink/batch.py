"""Driver side of the Kinesis sink: one micro-batch of the shared Kafka sink plan."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.errors import BatchError
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.kafka.spark_read import Deliver
from connectors.kinesis_sink.config import KinesisSinkConfig
from connectors.kinesis_sink.write import KinesisTask, kinesis_client, put_arrow_batches
from connectors.outage import Unreachable


def check_stream(config: KinesisSinkConfig, stream: str) -> None:
    """A stream that does not exist or is not ACTIVE fails the run before anything is read, in one line."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        summary = kinesis_client(config).describe_stream_summary(StreamName=stream)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise BatchError(f"Kinesis stream {stream} ({config.region}): {error.get('Code')}: "
                         f"{error.get('Message')}") from None
    except BotoCoreError as exc:
        raise Unreachable(f"Kinesis at {config.endpoint or config.region}: {exc}") from None
    status = summary["StreamDescriptionSummary"]["StreamStatus"]
    if status not in ("ACTIVE", "UPDATING"):
        raise BatchError(f"Kinesis stream {stream} is {status}, not ACTIVE")


def deliver_to_kinesis(bridge_name: str, config: KinesisSinkConfig, kafka: KafkaAdmin) -> Deliver:
    """The executors' delivery to the bridge's Kinesis streams, each checked to exist first."""
    for topic in kafka.partitions(config.topic_list() or None, config.topics_regex):
        check_stream(config, config.stream_for(topic))
    return functools.partial(put_arrow_batches, KinesisTask(bridge_name, config, dead_letter_client_config(kafka, config)))


def run_kinesis_sink_batch(spark: SparkSession, bridge_name: str, config: KinesisSinkConfig, kafka: KafkaAdmin,
                           recorded: Offsets, batch: BatchSettings, consumer_group: str) -> SinkBatchResult:
    return run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                deliver_to_kinesis(bridge_name, config, kafka))
