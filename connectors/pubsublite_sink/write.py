"""Executor side of the Lite sink: convert and publish one Spark partition's records, wait for every ack.

Runs in Spark's Python workers via mapInArrow. Rows are converted column-wise (columnar.py) and
published as raw requests, one stream per Lite partition (connectors.pubsublite.stream_publisher),
on one asyncio loop per task. It yields one summary row per Kafka partition only after Lite
acknowledged every message, so the driver records offsets only for delivered data.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa

from connectors.config.routing import PerTarget
from connectors.errors import BatchError
from connectors.kafka.record import RecordError
from connectors.kafka.sink_tally import SinkTally, TalliedBatch
from connectors.outage import Unreachable
from connectors.pubsublite.clients import LiteConnection
from connectors.pubsublite.stream_publisher import LitePublisher, LitePublishFailed, LitePublishSettings
from connectors.pubsublite_sink.columnar import LiteColumnarConverter
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig

SHUTDOWN_TIMEOUT_S = 60


@dataclass(frozen=True)
class LiteSinkTask:
    bridge_name: str
    config: PubSubLiteSinkConfig
    connection: LiteConnection
    kafka_client_config: dict[str, str]
    lite_partitions: dict[str, int]  # each Lite topic's partition count, read once by the driver
    outage_timeout_s: float = 30


def kafka_partition_router(lite_partitions: int) -> Callable[[object, int], int]:
    """pubsublite.ordering.mode=KAFKA: a message goes to the Lite partition numbered as its Kafka partition."""

    def route(message, kafka_partition: int) -> int:
        if kafka_partition >= lite_partitions:
            # The driver checks this before a batch starts; this guards a topic that grew since.
            raise RecordError(f"Kafka partition {kafka_partition} has no Pub/Sub Lite partition (the Lite topic "
                              f"has {lite_partitions}); pubsublite.ordering.mode=KAFKA needs at least as many")
        return kafka_partition

    return route


def default_router(lite_partitions: int) -> Callable[[object, int], int]:
    """The client library's DefaultRoutingPolicy: sha256 of the key modulo the partition count, round robin
    from a random partition for messages without a key."""
    next_round_robin = random.randrange(lite_partitions)

    def route(message, kafka_partition: int) -> int:
        nonlocal next_round_robin
        if message.key:
            return int.from_bytes(hashlib.sha256(message.key).digest(), "big") % lite_partitions
        partition, next_round_robin = next_round_robin, (next_round_robin + 1) % lite_partitions
        return partition

    return route


async def _publish_all(task: LiteSinkTask, batches: Iterator[pa.RecordBatch]) -> SinkTally:
    cfg = task.config
    converter = LiteColumnarConverter(cfg)
    tally = SinkTally(task.bridge_name, cfg, task.kafka_client_config)
    router = kafka_partition_router if cfg.pubsublite_ordering_mode == "KAFKA" else default_router

    def acked(origins: list) -> None:
        for counts in origins:
            counts.published += 1

    topic = cfg.topic_path()
    channel = task.connection.async_publish_channel(topic.location)
    settings = LitePublishSettings(retry_timeout_s=task.outage_timeout_s)

    # One publisher and router per Lite topic (several with ${topic} in pubsublite.topic), on the one channel.
    def publisher_and_router(path: str) -> tuple[LitePublisher, Callable[[object, int], int]]:
        if path not in task.lite_partitions:  # a topic that matched the regex after the driver looked
            raise BatchError(f"Pub/Sub Lite topic {path} was not looked up before the batch; the next batch will")
        return LitePublisher(channel, path, settings, acked), router(task.lite_partitions[path])

    publisher_for = PerTarget(lambda kafka_topic: str(cfg.topic_path(kafka_topic)), publisher_and_router)

    try:
        for batch in batches:
            tallied = TalliedBatch(batch, tally)
            kafka_partitions = batch.column("partition").to_pylist()
            kafka_topics = batch.column("topic").to_pylist()
            for row, outcome in converter.convert(batch):
                if isinstance(outcome, RecordError):
                    tally.reject(tallied.record(row), "VALUE_CONVERTER", outcome)
                    continue
                message, size = outcome
                publisher, route = publisher_for(kafka_topics[row])
                await publisher.add(message, size, tallied.counts(row), route(message, kafka_partitions[row]))
            for publisher, _ in publisher_for.by_target.values():
                publisher.seal_all()
        # The rest must be acknowledged in time, or the task fails (and records nothing).
        for publisher, _ in publisher_for.by_target.values():
            await publisher.close(SHUTDOWN_TIMEOUT_S)
    except LitePublishFailed as exc:
        if exc.unanswered:
            raise Unreachable(f"Pub/Sub Lite at {task.connection.address_of(topic.location)} did not answer for "
                              f"{task.outage_timeout_s:.0f} s: {exc}; the run recorded nothing") from None
        raise BatchError(f"publish to Pub/Sub Lite failed: {exc}") from exc
    finally:
        await channel.close()
    tally.flush_dead_letters()
    return tally


def publish_arrow_batches(task: LiteSinkTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield asyncio.run(_publish_all(task, batches)).summary()
