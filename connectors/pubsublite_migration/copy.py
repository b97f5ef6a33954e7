"""Copies Lite partition p to Kafka partition p, in order: key, data, attributes as headers, event time else
publish time as the timestamp (as the Lite source writes them), and the message's Lite offset in a `lite.offset`
header. One idempotent producer: within a run Kafka holds each partition's copy in order without gaps or copies,
so whatever a killed run left, the last record in Kafka says where the next run goes on."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

from connectors.errors import BatchError
from connectors.kafka.connection import client_logger
from connectors.pubsublite_migration.kafka_side import LITE_OFFSET_HEADER
from connectors.pubsublite_migration.lite_side import LiteSide, read_messages, run_reads
from connectors.pubsublite_source.convert import attribute_headers, record_timestamp_ms

FLUSH_TIMEOUT_S = 60


@dataclass
class PartitionCopy:
    partition: int
    start: int  # first Lite offset to copy (the one after the last copied)
    end: int  # the Lite head when the run was planned: the copy stops there
    to_copy: int  # messages Lite holds in [start, end)
    copied: int = 0  # acknowledged by Kafka this run


def copy_partitions(lite: LiteSide, through: str, kafka_config: dict, kafka_topic: str,
                    copies: list[PartitionCopy], progress: Callable[[int, int], None] = lambda p, n: None) -> None:
    """Copies every [start, end) range, all partitions at once; `progress(partition, n)` as Kafka acknowledges n
    more records. Raises naming the first record Kafka refused (what was acknowledged before it stays)."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def on_delivery(copy: PartitionCopy):
        def callback(err, msg) -> None:
            if err is not None:
                failures.append(f"Lite partition {copy.partition}: {err.str()}")
                return
            copy.copied += 1
            progress(copy.partition, 1)
        return callback

    producer = Producer({**kafka_config, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                         "compression.type": "lz4", "log_level": 3, "logger": client_logger()})

    async def copy_one(client, copy: PartitionCopy) -> None:
        callback = on_delivery(copy)
        async for batch in read_messages(client, through, copy.partition, copy.start, copy.end):
            for sequenced in batch:
                message = sequenced.message
                headers = [*attribute_headers(message), (LITE_OFFSET_HEADER, str(sequenced.cursor.offset).encode())]
                while True:
                    try:
                        producer.produce(kafka_topic, key=bytes(message.key) or None, value=bytes(message.data),
                                         headers=headers, timestamp=record_timestamp_ms(sequenced),
                                         partition=copy.partition, on_delivery=callback)
                        break
                    except BufferError:  # the producer's queue is full: let Kafka catch up
                        producer.poll(0.05)
            producer.poll(0)
            if failures:
                raise BatchError(f"Kafka topic {kafka_topic} refused a record: {failures[0]}")
            await asyncio.sleep(0)  # the other partitions' reads

    async def copy_all(client) -> list:
        return await asyncio.gather(*(copy_one(client, c) for c in copies if c.start < c.end))

    try:
        run_reads(lite.connection, lite.region, copy_all)
    finally:
        unanswered = producer.flush(FLUSH_TIMEOUT_S)
    if unanswered:
        raise BatchError(f"Kafka did not acknowledge {unanswered} records of topic {kafka_topic} within "
                         f"{FLUSH_TIMEOUT_S} s; run the migration again: it goes on from what Kafka holds")
    if failures:
        raise BatchError(f"Kafka topic {kafka_topic} refused {len(failures)} records: {'; '.join(failures[:3])}")
