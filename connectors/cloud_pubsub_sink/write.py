"""Executor side of the sink: convert and publish one Spark partition's records, wait for every ack.

Runs inside Spark's Python workers via mapInArrow (classic and Spark Connect alike). Rows are
converted column-wise (columnar.py) and published as raw requests on one gRPC channel with several
in flight (request_publisher.py). It yields one summary row per Kafka partition only after Pub/Sub
acknowledged every message, so the driver records offsets only for delivered data. Any unhandled
failure fails the Spark task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from google.pubsub_v1.types import PubsubMessage

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub.request_publisher import PublishFailed, PublishSettings, RequestPublisher, RowRun
from connectors.cloud_pubsub_sink.columnar import ColumnarConverter
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.config.routing import PerTarget, is_routed
from connectors.errors import BatchError
from connectors.kafka.record import RecordError
from connectors.kafka.sink_tally import SinkTally, TalliedBatch
from connectors.outage import Unreachable

# Sealed but unacknowledged, per task, when no flow-control key is set: bounds executor memory
# whatever the batch size (the Arrow batches of unacknowledged messages stay referenced).
DEFAULT_MAX_OUTSTANDING_MESSAGES = 10_000
DEFAULT_MAX_OUTSTANDING_BYTES = 64 << 20
MAX_IN_FLIGHT_REQUESTS = 8


@dataclass(frozen=True)
class SinkTask:
    bridge_name: str
    config: CloudPubSubSinkConfig
    connection: PubSubConnection
    kafka_client_config: dict[str, str]
    outage_timeout_s: float


def publish_settings(cfg: CloudPubSubSinkConfig, outage_timeout_s: float | None = None) -> PublishSettings:
    return PublishSettings(
        max_messages=cfg.max_buffer_size,
        max_bytes=cfg.max_buffer_bytes,
        delay_s=cfg.delay_ms / 1000,
        request_timeout_s=cfg.max_request_timeout_ms / 1000,
        total_timeout_s=cfg.max_total_timeout_ms / 1000,
        max_outstanding_messages=min(cfg.max_outstanding_messages or DEFAULT_MAX_OUTSTANDING_MESSAGES,
                                     DEFAULT_MAX_OUTSTANDING_MESSAGES),
        max_outstanding_bytes=min(cfg.max_outstanding_request_bytes or DEFAULT_MAX_OUTSTANDING_BYTES,
                                  DEFAULT_MAX_OUTSTANDING_BYTES),
        max_in_flight_requests=MAX_IN_FLIGHT_REQUESTS,
        compression_threshold=cfg.compression_bytes_threshold if cfg.enable_compression else None,
        unanswered_timeout_s=outage_timeout_s,
    )


def publish_arrow_batches(task: SinkTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    cfg = task.config
    tally = SinkTally(task.bridge_name, cfg, task.kafka_client_config)
    message_pb = PubsubMessage.pb()

    def acked(origins: list) -> None:
        for origin in origins:
            if isinstance(origin, RowRun):  # encoded messages of rows of one single-partition batch
                origin.origin.counts(origin.first).published += origin.count
            else:
                slot, row = origin
                slot.counts(row).published += 1

    def rejected(origin, message, error: Exception) -> None:
        slot, row = origin
        tally.reject(slot.record(row), "TASK_PUT", error)

    channel = task.connection.shared_publish_channel()
    topic_schemas = None
    if cfg.message_format == "topic-schema":
        # Its Avro and Protobuf codecs are imported only here; one schema lookup per Pub/Sub topic.
        from connectors.cloud_pubsub.topic_schema import TopicCodec, lookup_topic_schema

        topic_schemas = PerTarget(cfg.topic_path, lambda path: TopicCodec(lookup_topic_schema(channel, path)))
    converter = ColumnarConverter(cfg, topic_schemas)
    settings = publish_settings(cfg, task.outage_timeout_s)
    # One publisher per Pub/Sub topic (several with ${topic} in cps.topic), all on the one channel.
    publisher_for = PerTarget(cfg.topic_path, lambda path: RequestPublisher(channel, path, settings, acked, rejected))

    routed = is_routed(cfg.cps_topic)
    try:
        for batch in batches:
            slot = TalliedBatch(batch, tally)
            encoded = converter.encoded(batch) if not routed and slot.single is not None else None
            if encoded is not None:
                publisher_for("").add_encoded(encoded, slot)
                continue
            topics = batch.column("topic").to_pylist() if routed else None
            publisher = None if routed else publisher_for("")
            for row, outcome in converter.convert(batch):
                if outcome is None:
                    slot.counts(row).skipped += 1
                elif isinstance(outcome, RecordError):
                    tally.reject(slot.record(row), "VALUE_CONVERTER", outcome)
                else:
                    if outcome.headers_dropped:
                        slot.counts(row).headers_dropped += outcome.headers_dropped
                    message = message_pb(data=outcome.data, attributes=outcome.attributes,
                                         ordering_key=outcome.ordering_key)
                    (publisher_for(topics[row]) if routed else publisher).add(
                        message, outcome.size(), (slot, row), outcome.ordering_key)
        # The rest must be acknowledged within maxShutdownTimeoutMs, or the task fails (and records nothing).
        deadline = time.monotonic() + cfg.max_shutdown_timeout_ms / 1000
        for publisher in publisher_for.by_target.values():
            publisher.close(max(0.0, deadline - time.monotonic()))
        tally.flush_dead_letters()
    except PublishFailed as exc:
        slot, row = exc.origins[0][:2]  # (slot, row), or a RowRun's slot and first row
        topic_path = cfg.topic_path(slot.record(row).topic)
        if exc.unanswered:
            raise Unreachable(f"Pub/Sub at {task.connection.address} did not answer for {task.outage_timeout_s:.0f} s "
                              f"while publishing {slot.record(row).where} to {topic_path}; "
                              "the run recorded nothing") from None
        raise BatchError(f"{slot.record(row).where}: {exc}") from exc
    yield tally.summary()
