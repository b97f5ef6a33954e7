"""Executor side of the sink: convert and publish one Spark partition's records, wait for every ack.

Runs inside Spark's Python workers via mapInArrow (classic and Spark Connect alike). It yields
one summary row per Kafka partition only after Pub/Sub acknowledged every message, so the
driver records offsets only for delivered data. Any unhandled failure fails the Spark task.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from google.cloud.pubsub_v1.publisher.exceptions import PublishToPausedOrderingKeyException

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import CloudPubSubSinkConverter, OutgoingMessage
from connectors.kafka.record import KafkaRecord, RecordError, records_from_arrow
from connectors.kafka.sink_tally import SinkTally
# Futures waited on before reading more: bounds executor memory whatever the batch size.
MAX_PENDING_FUTURES = 5_000


@dataclass(frozen=True)
class SinkTask:
    bridge_name: str
    config: CloudPubSubSinkConfig
    connection: PubSubConnection
    kafka_client_config: dict[str, str]


def _publisher(task: SinkTask, single: bool = False):
    from google.api_core import exceptions, retry
    from google.cloud import pubsub_v1

    cfg = task.config
    batch = pubsub_v1.types.BatchSettings(
        max_bytes=cfg.max_buffer_bytes,
        max_latency=cfg.delay_ms / 1000,
        max_messages=1 if single else cfg.max_buffer_size,
    )
    flow = pubsub_v1.types.PublishFlowControl()
    if cfg.flow_control_enabled:
        flow = pubsub_v1.types.PublishFlowControl(
            message_limit=cfg.max_outstanding_messages or 2**63 - 1,
            byte_limit=cfg.max_outstanding_request_bytes or 2**63 - 1,
            limit_exceeded_behavior=pubsub_v1.types.LimitExceededBehavior.BLOCK,
        )
    transient = retry.if_exception_type(
        exceptions.Aborted, exceptions.Cancelled, exceptions.DeadlineExceeded, exceptions.InternalServerError,
        exceptions.ResourceExhausted, exceptions.ServiceUnavailable, exceptions.Unknown,
    )
    options = pubsub_v1.types.PublisherOptions(
        enable_message_ordering=cfg.ordering_key_source != "none",
        flow_control=flow,
        retry=retry.Retry(predicate=transient, initial=0.1, maximum=60, multiplier=1.3,
                          timeout=cfg.max_total_timeout_ms / 1000),
        timeout=cfg.max_request_timeout_ms / 1000,
    )
    threshold = cfg.compression_bytes_threshold if cfg.enable_compression else None
    return task.connection.publisher(batch, options, threshold)


def publish_arrow_batches(task: SinkTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    cfg = task.config
    converter = CloudPubSubSinkConverter(cfg)
    publisher = _publisher(task)
    topic_path = publisher.topic_path(cfg.cps_project, cfg.cps_topic)
    tally = SinkTally(task.bridge_name, cfg, task.kafka_client_config)
    pending: collections.deque = collections.deque()

    def settle(record: KafkaRecord, message: OutgoingMessage, future, timeout_s: float | None = None) -> None:
        from google.api_core import exceptions

        try:
            future.result(timeout=timeout_s)
        except Exception as exc:
            if message.ordering_key:
                # The client pauses a key after a failure; the reference never resumes it.
                try:
                    publisher.resume_publish(topic_path, message.ordering_key)
                except RuntimeError:
                    pass  # the key was not paused (e.g. a timeout, not a failed publish)
            if not isinstance(exc, (exceptions.InvalidArgument, exceptions.FailedPrecondition)):
                raise RuntimeError(f"{record.where}: publish failed: {exc}") from exc
            # A whole publish request fails for one bad message; give each message its own try.
            alone = _publisher(task, single=True)
            try:
                alone.publish(topic_path, message.data, ordering_key=message.ordering_key,
                              **message.attributes).result()
            except (exceptions.InvalidArgument, exceptions.FailedPrecondition):
                tally.reject(record, "TASK_PUT", exc)
                return
            finally:
                alone.stop()
        tally.of(record).published += 1

    try:
        for batch in batches:
            for record in records_from_arrow(batch):
                tally.read(record)
                try:
                    message = converter.convert(record)
                except RecordError as exc:
                    tally.reject(record, "VALUE_CONVERTER", exc)
                    continue
                if message is None:
                    tally.of(record).skipped += 1
                    continue
                try:
                    future = publisher.publish(
                        topic_path, message.data, ordering_key=message.ordering_key, **message.attributes
                    )
                except PublishToPausedOrderingKeyException:
                    while pending:  # settle resumes the key once its failed message is handled
                        settle(*pending.popleft())
                    future = publisher.publish(
                        topic_path, message.data, ordering_key=message.ordering_key, **message.attributes
                    )
                pending.append((record, message, future))
                while len(pending) > MAX_PENDING_FUTURES:
                    settle(*pending.popleft())
        # The rest must be acknowledged within maxShutdownTimeoutMs, or the task fails (and records nothing).
        deadline = time.monotonic() + cfg.max_shutdown_timeout_ms / 1000
        while pending:
            settle(*pending.popleft(), timeout_s=max(deadline - time.monotonic(), 0.001))
        tally.flush_dead_letters()
    finally:
        publisher.stop()
    yield tally.summary()
