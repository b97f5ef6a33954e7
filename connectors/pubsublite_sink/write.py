"""Executor side of the Lite sink: convert and publish one Spark partition's records, wait for every ack.

Runs in Spark's Python workers via mapInArrow. The library's publisher is asyncio-based, so each
task runs one event loop; it yields one summary row per Kafka partition only after Lite
acknowledged every message, so the driver records offsets only for delivered data.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from google.cloud.pubsublite.internal.wire.routing_policy import RoutingPolicy
from google.cloud.pubsublite.types import Partition
from google.cloud.pubsublite_v1 import types

from connectors.kafka.record import KafkaRecord, RecordError, records_from_arrow
from connectors.kafka.sink_tally import SinkTally
from connectors.pubsublite.clients import LiteConnection
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.convert import KAFKA_PARTITION_ATTRIBUTE, PubSubLiteSinkConverter

# Publishes awaited before reading more: bounds executor memory whatever the batch size.
MAX_PENDING = 5_000
SHUTDOWN_TIMEOUT_S = 60


class KafkaPartitionRoutingPolicy(RoutingPolicy):
    """pubsublite.ordering.mode=KAFKA: a message goes to the Lite partition numbered as its Kafka partition."""

    def __init__(self, partition_count: int):
        self._partition_count = partition_count

    def route(self, message) -> Partition:
        partition = int(message.attributes[KAFKA_PARTITION_ATTRIBUTE].values[0])
        if partition >= self._partition_count:
            # As the reference: this mode cannot work when Kafka has more partitions than Lite.
            raise ValueError(f"Kafka partition {partition} has no Pub/Sub Lite partition (the Lite topic has "
                             f"{self._partition_count}); pubsublite.ordering.mode=KAFKA needs at least as many")
        return Partition(partition)


def routing_policy_factory(ordering_mode: str):
    if ordering_mode == "KAFKA":
        return KafkaPartitionRoutingPolicy
    from google.cloud.pubsublite.internal.wire.default_routing_policy import DefaultRoutingPolicy

    return DefaultRoutingPolicy


@dataclass(frozen=True)
class LiteSinkTask:
    bridge_name: str
    config: PubSubLiteSinkConfig
    connection: LiteConnection
    kafka_client_config: dict[str, str]


async def _publish_all(task: LiteSinkTask, batches: Iterator[pa.RecordBatch]) -> SinkTally:
    cfg = task.config
    converter = PubSubLiteSinkConverter(cfg)
    tally = SinkTally(task.bridge_name, cfg, task.kafka_client_config)

    async def settle(record: KafkaRecord, future: asyncio.Future) -> None:
        try:
            await future
        except Exception as exc:
            raise RuntimeError(f"{record.where}: publish to Pub/Sub Lite failed: {exc}") from exc
        tally.of(record).published += 1

    publisher = task.connection.wire_publisher(cfg.topic_path(), routing_policy_factory(cfg.pubsublite_ordering_mode))
    pending: collections.deque = collections.deque()
    async with publisher:
        for batch in batches:
            for record in records_from_arrow(batch):
                tally.read(record)
                try:
                    message = types.PubSubMessage.wrap(converter.convert(record))
                except RecordError as exc:
                    tally.reject(record, "VALUE_CONVERTER", exc)
                    continue
                pending.append((record, asyncio.ensure_future(publisher.publish(message))))
                while len(pending) > MAX_PENDING:
                    await settle(*pending.popleft())
        # The rest must be acknowledged in time, or the task fails (and records nothing).
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        while pending:
            record, future = pending.popleft()
            await asyncio.wait_for(settle(record, future), max(deadline - time.monotonic(), 0.001))
    tally.flush_dead_letters()
    return tally


def publish_arrow_batches(task: LiteSinkTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield asyncio.run(_publish_all(task, batches)).summary()
