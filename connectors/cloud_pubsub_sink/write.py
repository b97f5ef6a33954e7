"""Executor side of the sink: convert and publish one Spark partition's records, wait for every ack.

Runs inside Spark's Python workers via mapInArrow (classic and Spark Connect alike). Rows are
converted column-wise (columnar.py) and published as raw requests on one gRPC channel with several
in flight (request_publisher.py). The writer (sink_writer.SinkWriter) flushes only once Pub/Sub
acknowledged every message, so the driver records offsets only for delivered data. Any unhandled
failure fails the Spark task.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import pyarrow as pa
from google.pubsub_v1.types import PubsubMessage

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub.request_publisher import PublishFailed, PublishSettings, RequestPublisher, RowRun
from connectors.cloud_pubsub_sink.columnar import ColumnarConverter
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.config.routing import PerTarget, is_routed
from connectors.errors import BatchError, RecordError
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.framework.sink_writer import OpenWriter, SinkWriter
from connectors.outage import Unreachable

# Sealed but unacknowledged, per task, when no flow-control key is set: bounds executor memory
# whatever the batch size (the Arrow batches of unacknowledged messages stay referenced).
DEFAULT_MAX_OUTSTANDING_MESSAGES = 10_000
DEFAULT_MAX_OUTSTANDING_BYTES = 64 << 20
MAX_IN_FLIGHT_REQUESTS = 8


@dataclass(frozen=True)
class PubSubTarget:
    """What the driver hands each task: the bridge's config, the emulator or service, and the outage timeout."""

    config: CloudPubSubSinkConfig
    connection: PubSubConnection
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


def pubsub_writer(config: CloudPubSubSinkConfig, connection: PubSubConnection, outage_timeout_s: float) -> OpenWriter:
    """Driver side: how a task opens its writer to the bridge's Pub/Sub topics."""
    return functools.partial(PubSubWriter, PubSubTarget(config, connection, outage_timeout_s))


class PubSubWriter(SinkWriter):
    """A task's records converted column-wise and published on this process's shared channel, one publisher per
    Pub/Sub topic (several with ${topic} in cps.topic)."""

    def __init__(self, target: PubSubTarget, tally: SinkTally):
        super().__init__(tally)
        cfg = self.config = target.config
        self.target = target
        channel = target.connection.shared_publish_channel()
        topic_schemas = None
        if cfg.message_format == "topic-schema":
            # Its Avro and Protobuf codecs are imported only here; one schema lookup per Pub/Sub topic.
            from connectors.cloud_pubsub.topic_schema import TopicCodec, lookup_topic_schema

            topic_schemas = PerTarget(cfg.topic_path, lambda path: TopicCodec(lookup_topic_schema(channel, path)))
        self._converter = ColumnarConverter(cfg, topic_schemas)
        settings = publish_settings(cfg, target.outage_timeout_s)
        # A killed run's batch stops at its lease's lapse, its unsent messages dropped (SinkWriter.keep_going).
        self._publisher_for = PerTarget(cfg.topic_path, lambda path: RequestPublisher(
            channel, path, settings, self._acked, self._rejected, keep_going=self.keep_going))
        self._routed = is_routed(cfg.cps_topic)
        self._message_pb = PubsubMessage.pb()

    def _acked(self, origins: list) -> None:
        for origin in origins:
            if isinstance(origin, RowRun):  # encoded messages of rows of one single-partition batch
                origin.origin.counts(origin.first).published += origin.count
            else:
                slot, row = origin
                slot.counts(row).published += 1

    def _rejected(self, origin, message, error: Exception) -> None:
        slot, row = origin
        self.tally.reject(slot.record(row), "TASK_PUT", error)

    def put(self, records: pa.RecordBatch) -> None:
        slot = TalliedBatch(records, self.tally)
        encoded = self._converter.encoded(records) if not self._routed and slot.single is not None else None
        if encoded is not None:
            self._publisher_for("").add_encoded(encoded, slot)
            return
        topics = records.column("topic").to_pylist() if self._routed else None
        publisher = None if self._routed else self._publisher_for("")
        for row, outcome in self._converter.convert(records):
            if outcome is None:
                slot.counts(row).skipped += 1
            elif isinstance(outcome, RecordError):
                self.tally.reject(slot.record(row), outcome.stage, outcome)
            else:
                if outcome.headers_dropped:
                    slot.counts(row).headers_dropped += outcome.headers_dropped
                message = self._message_pb(data=outcome.data, attributes=outcome.attributes,
                                           ordering_key=outcome.ordering_key)
                (self._publisher_for(outcome.topic or topics[row]) if self._routed else publisher).add(
                    message, outcome.size(), (slot, row), outcome.ordering_key)

    def flush(self) -> None:
        # The rest must be acknowledged within maxShutdownTimeoutMs, or the task fails (and records nothing).
        deadline = time.monotonic() + self.config.max_shutdown_timeout_ms / 1000
        for publisher in self._publisher_for.by_target.values():
            publisher.close(max(0.0, deadline - time.monotonic()))

    def __exit__(self, exc_type, exc, traceback) -> bool | None:
        if not isinstance(exc, PublishFailed):
            return None
        slot, row = exc.origins[0][:2]  # (slot, row), or a RowRun's slot and first row
        topic_path = self.config.topic_path(slot.record(row).topic)
        if exc.unanswered:
            raise Unreachable(f"Pub/Sub at {self.target.connection.address} did not answer for "
                              f"{self.target.outage_timeout_s:.0f} s while publishing {slot.record(row).where} to "
                              f"{topic_path}; the run recorded nothing") from None
        raise BatchError(f"{slot.record(row).where}: {exc}") from exc
