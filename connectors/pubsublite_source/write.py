"""Executor side of the Lite source: read assigned Lite partition ranges and write them to Kafka.

Each Spark task gets whole Lite partitions (one range each). It yields a summary row per range
only after Kafka acknowledged every record of it; the driver commits cursors after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa

from confluent_kafka import KafkaException

from connectors.arrow_rows import rows_batch
from connectors.errors import BatchError
from connectors.kafka_connect.errors import ConversionError
from connectors.framework.batch_lease import BatchLease, watching
from connectors.kafka.connection import kept_client, refused_for_good, source_producer_config
from connectors.kafka.transactions import PositionsTopic
from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.pubsublite_source.convert import PubSubLiteSourceConverter
from connectors.pubsublite_source.read import read_partition
from connectors.transforms.chain import TransformFailed

log = logging.getLogger(__name__)
RANGE_SCHEMA = "lite_partition int, start_offset long, end_offset long"
# dropped: the task's records Kafka refused for good under errors.tolerance=all (on its first row only).
# started_at: where the range was read from (under exactly once, the positions topic may say further on than the
# driver planned: a killed run's transaction had committed).
SUMMARY_SCHEMA = ("lite_partition int, started_at long, next_cursor long, messages long, written long, bytes long, "
                  "lost long, dropped long, filtered long")


@dataclass(frozen=True)
class LiteSourceTask:
    config: PubSubLiteSourceConfig
    connection: LiteConnection
    kafka_client_config: dict[str, str]
    kafka_partition_count: int
    outage_timeout_s: float  # a record Kafka does not acknowledge in this time fails the task
    positions: PositionsTopic | None = None  # exactly.once.support=required: where the transactions record positions
    lease: BatchLease | None = None  # a micro-batch's: its tasks read while the run holds it


class KafkaWriter:
    """An idempotent producer that raises if Kafka refused any record, except, under
    errors.tolerance=all, records it refuses for good (counted in `dropped` and logged)."""

    def __init__(self, task: LiteSourceTask, producer, in_transaction: bool = False):
        self.topic = task.config.kafka_topic
        self.producer = producer
        self.tolerate = task.config.errors_tolerance == "all"
        # A record refused after it was sent fails its transaction: it cannot be skipped alone.
        self.tolerate_sent = self.tolerate and not in_transaction
        self.failures: list[str] = []
        self.dropped = 0
        self.filtered = 0  # dropped by a transform: read, not written

    def _refused(self, err, what: str, tolerate: bool) -> None:
        if tolerate and refused_for_good(err):
            log.warning("dropping %s: Kafka topic %s refused it: %s (errors.tolerance=all)", what, self.topic, err.str())
            self.dropped += 1
        else:
            self.failures.append(f"{what}: {err.str()}")

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._refused(err, f"a message of {len(msg.value() or b'')} bytes", self.tolerate_sent)

    def write(self, record, where: str) -> bool:
        """False when the record was refused before sending (and dropped or failed)."""
        kwargs = {} if record.partition is None else {"partition": record.partition}
        while True:
            try:
                self.producer.produce(record.topic or self.topic, key=record.key, value=record.value, headers=record.headers or None,
                                      timestamp=record.timestamp_ms, on_delivery=self._on_delivery, **kwargs)
                return True
            except BufferError:
                self.producer.poll(0.1)
            except KafkaException as exc:  # too large for the producer, say
                self._refused(exc.args[0], where, self.tolerate)
                return False

    def flush(self) -> None:
        while self.producer.flush(5) > 0:
            pass
        if self.failures:
            raise BatchError(self.refusals())

    def refusals(self) -> str:
        return f"Kafka topic {self.topic} did not accept {len(self.failures)} records: {'; '.join(self.failures[:3])}"


async def _move_range(task: LiteSourceTask, client, writer: KafkaWriter, lite_partition: int,
                      start: int, end: int, keep_going: Callable[[], bool]) -> dict:
    cfg = task.config
    converter = PubSubLiteSourceConverter(cfg, task.kafka_partition_count, round_robin_start=lite_partition)
    stats: dict = {}
    messages = written_bytes = 0
    async with contextlib.aclosing(read_partition(
            client, str(cfg.subscription_path()), lite_partition, start, end, cfg.partition_flow_control_messages,
            cfg.partition_flow_control_bytes, stats)) as batches:
        async for batch in batches:
            written_bytes += write_batch(converter, writer, lite_partition, batch)
            messages += len(batch)
            if not keep_going():
                break
    return {"lite_partition": lite_partition, "started_at": start, "next_cursor": stats["next_cursor"],
            "messages": messages, "written": messages, "bytes": written_bytes, "lost": stats["lost"]}


def write_batch(converter: PubSubLiteSourceConverter, writer: KafkaWriter, lite_partition: int, batch: list) -> int:
    """Hands a partition's messages to the producer (not waiting for Kafka); returns the bytes written."""
    written_bytes = 0
    for sequenced in batch:
        try:
            record = converter.convert(sequenced)
        except (ConversionError, TransformFailed) as exc:  # the run fails, naming the message; its cursor is not recorded
            raise BatchError(f"Lite partition {lite_partition} offset {sequenced.cursor.offset}: {exc}") from None
        if record is None:
            writer.filtered += 1
            continue
        if writer.write(record, f"Lite partition {lite_partition} offset {sequenced.cursor.offset}"):
            written_bytes += len(record.value or b"") + len(record.key or b"")
    writer.producer.poll(0)
    return written_bytes


def read_and_deliver(task: LiteSourceTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    ranges = [row for batch in batches for row in batch.to_pylist()]
    with watching(task.lease, task.kafka_client_config, f"reading {task.config.subscription_path()}") as keep_going, \
            kept_client(source_producer_config(task.kafka_client_config, task.outage_timeout_s)) as producer:  # kept for the worker's next task
        writer = KafkaWriter(task, producer)

        async def move_all() -> list[dict]:
            client = task.connection.async_subscriber_service(region_of(task.config.subscription_path().location))
            try:
                return [await _move_range(task, client, writer, r["lite_partition"], r["start_offset"],
                                          r["end_offset"], keep_going) for r in ranges if keep_going()]
            finally:
                # Closing the channel here ends the cancelled streams' request pumps before the loop closes.
                await client.transport.close()

        rows = asyncio.run(move_all())
        writer.flush()  # only now are the rows true: Kafka has every record
    for index, row in enumerate(rows):
        row["dropped"] = writer.dropped if index == 0 else 0
        row["filtered"] = writer.filtered if index == 0 else 0
    yield rows_batch(rows, SUMMARY_SCHEMA)
