"""Executor side of the Lite sink: convert and publish one Spark partition's records, wait for every ack.

Runs in Spark's Python workers via mapInArrow. Rows are converted column-wise (columnar.py) and
published as raw requests, one stream per Lite partition (connectors.pubsublite.stream_publisher),
on one asyncio loop per task. The writer (sink_writer.SinkWriter) flushes only once Lite
acknowledged every message, so the driver records offsets only for delivered data.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

from connectors.config.routing import PerTarget
from connectors.errors import BatchError, RecordError
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.framework.sink_writer import OpenWriter, SinkWriter
from connectors.outage import Unreachable, lite_outages_named
from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite.stream_publisher import LitePublisher, LitePublishFailed, LitePublishSettings
from connectors.pubsublite_sink.columnar import LiteColumnarConverter
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.convert import KAFKA_TOPIC_ATTRIBUTE

if TYPE_CHECKING:
    from connectors.kafka.admin import KafkaAdmin

SHUTDOWN_TIMEOUT_S = 60


@dataclass(frozen=True)
class LiteTarget:
    """What the driver hands each task: the config, the service, each Lite topic's partition count (read once by
    the driver: lite_writer) and the outage timeout."""

    config: PubSubLiteSinkConfig
    connection: LiteConnection
    lite_partitions: dict[str, int]
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


class LitePartitionsTooFew(ValueError):
    pass


def check_kafka_mode_partitions(kafka_partitions: dict[str, list[int]], lite_partitions: int, lite_topic: str) -> None:
    """pubsublite.ordering.mode=KAFKA maps Kafka partition n to Lite partition n: fail before moving anything
    when a Kafka topic has more partitions than the Lite topic, naming both counts."""
    for kafka_topic, partitions in sorted(kafka_partitions.items()):
        if len(partitions) > lite_partitions:
            raise LitePartitionsTooFew(
                f"Kafka topic {kafka_topic} has {len(partitions)} partitions but Pub/Sub Lite topic {lite_topic} has "
                f"{lite_partitions}; pubsublite.ordering.mode=KAFKA needs at least as many Lite partitions")


def lite_writer(config: PubSubLiteSinkConfig, connection: LiteConnection, kafka: KafkaAdmin,
                outage_timeout_s: float) -> OpenWriter:
    """Driver side: each Lite topic's partition count read once (one topic, or one per Kafka topic with ${topic}),
    then how a task opens its writer. Routed by a transform, the tasks look up the targets their records name."""
    kafka_partitions = kafka.partitions(config.topic_list() or None, config.topics_regex)
    lite_partitions: dict[str, int] = {}
    for kafka_topic in [] if config.routed_by_transforms() else sorted(kafka_partitions) or [""]:
        topic = config.topic_path(kafka_topic)
        if str(topic) not in lite_partitions:
            with lite_outages_named(connection, topic.location, f"reading the partition count of {topic}"):
                lite_partitions[str(topic)] = connection.admin(region_of(topic.location)).get_topic_partition_count(topic)
        if config.pubsublite_ordering_mode == "KAFKA" and kafka_topic:
            check_kafka_mode_partitions({kafka_topic: kafka_partitions[kafka_topic]}, lite_partitions[str(topic)],
                                        str(topic))
    return functools.partial(LiteWriter, LiteTarget(config, connection, lite_partitions, outage_timeout_s))


class LiteWriter(SinkWriter):
    """A task's records converted column-wise and published on one asyncio loop and channel, one publisher and
    router per Lite topic (several with ${topic} in pubsublite.topic)."""

    def __init__(self, target: LiteTarget, tally: SinkTally):
        super().__init__(tally)
        cfg = self.config = target.config
        self.target = target
        self._converter = LiteColumnarConverter(cfg)
        self._router = kafka_partition_router if cfg.pubsublite_ordering_mode == "KAFKA" else default_router
        self._location = cfg.topic_path().location
        self._settings = LitePublishSettings(retry_timeout_s=target.outage_timeout_s)
        # The writer's calls each run on this one loop: the channel and the publishers' streams live on it.
        self._loop = asyncio.Runner()
        self._channel = self._loop.run(self._open_channel())
        self._publisher_for = PerTarget(lambda kafka_topic: str(cfg.topic_path(kafka_topic)), self._publisher_and_router)
        # Routed by a transform: a message's Lite topic follows the topic it names (the record's after the
        # transforms, as Kafka Connect hands a sink task), not the Kafka topic it was read from.
        self._routed_by_transforms = cfg.routed_by_transforms()

    async def _open_channel(self):
        return self.target.connection.async_publish_channel(self._location)

    @staticmethod
    def _acked(origins: list) -> None:
        for counts in origins:
            counts.published += 1

    def _publisher_and_router(self, path: str) -> tuple[LitePublisher, Callable[[object, int], int]]:
        partitions = self.target.lite_partitions.get(path)
        if partitions is None and self._routed_by_transforms:
            partitions = self._partition_count(path)
        if partitions is None:  # a topic that matched the regex after the driver looked
            raise BatchError(f"Pub/Sub Lite topic {path} was not looked up before the batch; the next batch will")
        return LitePublisher(self._channel, path, self._settings, self._acked), self._router(partitions)

    def _partition_count(self, path: str) -> int:
        from google.api_core.exceptions import NotFound
        from google.cloud.pubsublite.types import TopicPath

        topic = TopicPath.parse(path)
        try:
            with lite_outages_named(self.target.connection, topic.location, f"reading the partition count of {path}"):
                return self.target.connection.admin(region_of(topic.location)).get_topic_partition_count(topic)
        except NotFound:
            raise BatchError(f"Pub/Sub Lite topic {path} does not exist (a transform routed records to it through "
                             f"pubsublite.topic={self.config.pubsublite_topic})") from None

    def put(self, records: pa.RecordBatch) -> None:
        self._loop.run(self._put(records))

    async def _put(self, records: pa.RecordBatch) -> None:
        tallied = TalliedBatch(records, self.tally)
        kafka_partitions = records.column("partition").to_pylist()
        kafka_topics = records.column("topic").to_pylist()
        for row, outcome in self._converter.convert(records):
            if outcome is None:  # a transform dropped it
                tallied.counts(row).skipped += 1
                continue
            if isinstance(outcome, RecordError):
                self.tally.reject(tallied.record(row), outcome.stage, outcome)
                continue
            message, size = outcome
            topic = (message.attributes[KAFKA_TOPIC_ATTRIBUTE].values[0].decode() if self._routed_by_transforms
                     else kafka_topics[row])
            publisher, route = self._publisher_for(topic)
            await publisher.add(message, size, tallied.counts(row), route(message, kafka_partitions[row]))
        for publisher, _ in self._publisher_for.by_target.values():
            publisher.seal_all()

    def flush(self) -> None:
        self._loop.run(self._flush())

    async def _flush(self) -> None:
        # The rest must be acknowledged in time, or the task fails (and records nothing).
        for publisher, _ in self._publisher_for.by_target.values():
            await publisher.close(SHUTDOWN_TIMEOUT_S)

    def __exit__(self, exc_type, exc, traceback) -> bool | None:
        try:
            self._loop.run(self._channel.close())
        finally:
            self._loop.close()  # cancels what is left of the publishers' streams
        if isinstance(exc, LitePublishFailed):
            if exc.unanswered:
                raise Unreachable(f"Pub/Sub Lite at {self.target.connection.address_of(self._location)} did not "
                                  f"answer for {self.target.outage_timeout_s:.0f} s: {exc}; the run recorded "
                                  "nothing") from None
            raise BatchError(f"publish to Pub/Sub Lite failed: {exc}") from exc
        return None
