"""Executor side of the source: pull, write to Kafka, and ack each message only after Kafka
acknowledged its record. A crash in between means redelivery (duplicates possible), never loss."""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter, MessageError, PubSubMessageIn

log = logging.getLogger(__name__)

SUMMARY_SCHEMA = "kafka_partition int, written long, bytes long, pulled long, acked long, dropped long"
# Acknowledge and ModifyAckDeadline requests must stay under 524,288 bytes; keep a margin for the
# subscription name and the protobuf framing of each id.
MAX_ACK_REQUEST_BYTES = 500_000
ACK_DEADLINE_EXTENSION_S = 60
PULL_TIMEOUT_S = 10


@dataclass(frozen=True)
class SourceTask:
    config: CloudPubSubSourceConfig
    connection: PubSubConnection
    kafka_client_config: dict[str, str]
    quota: int  # messages one task pulls at most


def ack_id_chunks(ack_ids: list[str], limit: int = MAX_ACK_REQUEST_BYTES) -> Iterator[list[str]]:
    """Split ack ids into requests under the service's size limit (the reference sends one request)."""
    chunk, size = [], 0
    for ack_id in ack_ids:
        cost = len(ack_id.encode()) + 4  # field tag and length prefix
        if chunk and size + cost > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(ack_id)
        size += cost
    if chunk:
        yield chunk


def _message_in(received) -> PubSubMessageIn:
    message = received.message
    publish_time = message.publish_time
    return PubSubMessageIn(
        data=bytes(message.data), attributes=dict(message.attributes), ordering_key=message.ordering_key,
        publish_time_ms=int(publish_time.timestamp() * 1000), ack_id=received.ack_id,
    )


def pull_and_deliver(task: SourceTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import Producer

    slots = [slot for batch in batches for slot in batch.column("slot").to_pylist()]
    cfg = task.config
    subscriber = task.connection.subscriber()
    path = subscriber.subscription_path(cfg.cps_project, cfg.cps_subscription)
    producer = Producer({
        **task.kafka_client_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "partitioner": "murmur2_random", "log_level": 3,
    })
    written: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])  # partition -> [records, bytes]
    totals = {"pulled": 0, "acked": 0, "dropped": 0}
    try:
        for slot in slots:
            converter = CloudPubSubSourceConverter(cfg, partitioner_start=slot)
            while totals["pulled"] < task.quota:
                response = subscriber.pull(
                    subscription=path, max_messages=min(cfg.cps_max_batch_size, task.quota - totals["pulled"]),
                    timeout=PULL_TIMEOUT_S,
                )
                if not response.received_messages:
                    break  # the subscription has nothing more for now: this micro-batch is done
                totals["pulled"] += len(response.received_messages)
                _deliver(task, subscriber, path, producer, converter, response.received_messages, written, totals)
    finally:
        producer.flush(30)
        subscriber.close()
    rows = [{"kafka_partition": p, "written": n, "bytes": b, "pulled": 0, "acked": 0, "dropped": 0}
            for p, (n, b) in written.items()]
    rows.append({"kafka_partition": -1, "written": 0, "bytes": 0, **totals})
    yield pa.RecordBatch.from_pylist(rows, schema=pa.schema([
        ("kafka_partition", pa.int32()), ("written", pa.int64()), ("bytes", pa.int64()),
        ("pulled", pa.int64()), ("acked", pa.int64()), ("dropped", pa.int64()),
    ]))


def _deliver(task, subscriber, path, producer, converter, received, written, totals) -> None:
    cfg = task.config
    delivered: list[str] = []
    failures: list[str] = []
    dropped: list[str] = []

    def on_delivery(ack_id: str, size: int):
        def callback(err, msg):
            if err is not None:
                failures.append(str(err))
                return
            delivered.append(ack_id)
            counts = written[msg.partition()]
            counts[0] += 1
            counts[1] += size
        return callback

    for item in received:
        message = _message_in(item)
        try:
            record = converter.convert(message)
        except MessageError as exc:
            if cfg.errors_tolerance == "none":
                raise MessageError(f"message {item.message.message_id}: {exc}") from exc
            log.warning("dropping message %s: %s (errors.tolerance=all)", item.message.message_id, exc)
            dropped.append(message.ack_id)
            continue
        kwargs = {} if record.partition is None else {"partition": record.partition}
        size = len(record.value or b"") + len(record.key or b"")
        while True:
            try:
                producer.produce(cfg.kafka_topic, key=record.key, value=record.value, headers=record.headers or None,
                                 timestamp=record.timestamp_ms, on_delivery=on_delivery(message.ack_id, size), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    pending = [m.ack_id for m in received]
    # Wait for Kafka; while it is slow, keep Pub/Sub from redelivering what is in flight.
    while producer.flush(5) > 0:
        for chunk in ack_id_chunks(pending):
            subscriber.modify_ack_deadline(subscription=path, ack_ids=chunk, ack_deadline_seconds=ACK_DEADLINE_EXTENSION_S)
    if failures:
        raise RuntimeError(f"Kafka did not accept {len(failures)} records: {failures[:3]}")
    for chunk in ack_id_chunks(delivered + dropped):
        subscriber.acknowledge(subscription=path, ack_ids=chunk)
    totals["acked"] += len(delivered) + len(dropped)
    totals["dropped"] += len(dropped)
