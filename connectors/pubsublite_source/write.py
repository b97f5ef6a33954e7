"""Executor side of the Lite source: read assigned Lite partition ranges and write them to Kafka.

Each Spark task gets whole Lite partitions (one range each). It yields a summary row per range
only after Kafka acknowledged every record of it; the driver commits cursors after that.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from connectors.arrow_rows import rows_batch
from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.pubsublite_source.convert import PubSubLiteSourceConverter
from connectors.pubsublite_source.read import read_partition

RANGE_SCHEMA = "lite_partition int, start_offset long, end_offset long"
SUMMARY_SCHEMA = "lite_partition int, next_cursor long, messages long, written long, bytes long, lost long"


@dataclass(frozen=True)
class LiteSourceTask:
    config: PubSubLiteSourceConfig
    connection: LiteConnection
    kafka_client_config: dict[str, str]
    kafka_partition_count: int


class _KafkaWriter:
    """An idempotent producer that raises if Kafka refused any record."""

    def __init__(self, task: LiteSourceTask):
        from confluent_kafka import Producer

        from connectors.kafka.connection import client_logger

        self.topic = task.config.kafka_topic
        self.producer = Producer({
            **task.kafka_client_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "partitioner": "murmur2_random", "log_level": 3, "logger": client_logger(),
        })
        self.failures: list[str] = []

    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self.failures.append(str(err))

    def write(self, record) -> None:
        kwargs = {} if record.partition is None else {"partition": record.partition}
        while True:
            try:
                self.producer.produce(self.topic, key=record.key, value=record.value, headers=record.headers or None,
                                      timestamp=record.timestamp_ms, on_delivery=self._on_delivery, **kwargs)
                return
            except BufferError:
                self.producer.poll(0.1)

    def flush(self) -> None:
        while self.producer.flush(5) > 0:
            pass
        if self.failures:
            raise RuntimeError(f"Kafka did not accept {len(self.failures)} records: {self.failures[:3]}")


async def _move_range(task: LiteSourceTask, client, writer: _KafkaWriter, lite_partition: int,
                      start: int, end: int) -> dict:
    cfg = task.config
    converter = PubSubLiteSourceConverter(cfg, task.kafka_partition_count, round_robin_start=lite_partition)
    stats: dict = {}
    messages = written_bytes = 0
    async for batch in read_partition(client, str(cfg.subscription_path()), lite_partition, start, end,
                                      cfg.partition_flow_control_messages, cfg.partition_flow_control_bytes, stats):
        for sequenced in batch:
            record = converter.convert(sequenced)
            writer.write(record)
            written_bytes += len(record.value or b"") + len(record.key or b"")
        messages += len(batch)
        writer.producer.poll(0)
    return {"lite_partition": lite_partition, "next_cursor": stats["next_cursor"], "messages": messages,
            "written": messages, "bytes": written_bytes, "lost": stats["lost"]}


def read_and_deliver(task: LiteSourceTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    ranges = [row for batch in batches for row in batch.to_pylist()]
    writer = _KafkaWriter(task)

    async def move_all() -> list[dict]:
        client = task.connection.async_subscriber_service(region_of(task.config.subscription_path().location))
        try:
            return [await _move_range(task, client, writer, r["lite_partition"], r["start_offset"], r["end_offset"])
                    for r in ranges]
        finally:
            # Closing the channel here ends the cancelled streams' request pumps before the loop closes.
            await client.transport.close()

    rows = asyncio.run(move_all())
    writer.flush()  # only now are the rows true: Kafka has every record
    yield rows_batch(rows, SUMMARY_SCHEMA)
