"""What the migration asks of Pub/Sub Lite: the topic, its subscriptions and their committed cursors, the heads,
and a partition's messages in order from an offset (read through a subscription, as Lite only serves reads that
way; a read never moves that subscription's cursor)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite_source.read import read_partition

# Messages and bytes the server may send ahead of the copy per partition.
READ_AHEAD_MESSAGES = 10_000
READ_AHEAD_BYTES = 20_000_000


@dataclass(frozen=True)
class LiteTopic:
    path: str  # projects/P/locations/L/topics/T
    partitions: int
    retention_period_ms: int | None  # None: kept by size only
    retention_bytes_per_partition: int
    subscriptions: tuple[str, ...]  # every subscription of the topic, full paths


@dataclass(frozen=True)
class LiteSubscription:
    path: str
    cursors: dict[int, int]  # partition -> first offset not acknowledged (0 where none was ever committed)


class LiteSide:
    def __init__(self, connection: LiteConnection, topic_path: str):
        from google.cloud.pubsublite.types import TopicPath

        self.connection = connection
        try:
            self.topic_path = TopicPath.parse(topic_path)
        except Exception:
            raise ValueError(f"--topic {topic_path!r} is not a Lite topic path "
                             "(projects/PROJECT/locations/LOCATION/topics/TOPIC)") from None
        self.region = region_of(self.topic_path.location)
        self._cursor_service = None

    def describe(self) -> LiteTopic:
        admin = self.connection.admin(self.region)
        topic = admin.get_topic(self.topic_path)
        retention = topic.retention_config
        period_ms = int(retention.period.total_seconds() * 1000) if retention.period else None
        return LiteTopic(
            path=str(self.topic_path), partitions=admin.get_topic_partition_count(self.topic_path),
            retention_period_ms=period_ms or None, retention_bytes_per_partition=retention.per_partition_bytes,
            subscriptions=tuple(sorted(str(s) for s in admin.list_topic_subscriptions(self.topic_path))))

    def subscription(self, path: str, partitions: int) -> LiteSubscription:
        service = self.connection.cursor_service(self.region)
        committed = {c.partition: c.cursor.offset
                     for c in service.list_partition_cursors(request={"parent": path})}
        return LiteSubscription(path, {p: committed.get(p, 0) for p in range(partitions)})

    def subscription_exists(self, path: str) -> bool:
        from google.api_core.exceptions import NotFound
        from google.cloud.pubsublite.types import SubscriptionPath

        try:
            self.connection.admin(self.region).get_subscription(SubscriptionPath.parse(path))
            return True
        except NotFound:
            return False

    def create_subscription(self, path: str) -> None:
        """A subscription of the topic whose cursors start at its oldest retained message."""
        from google.cloud.pubsublite import Subscription
        from google.cloud.pubsublite.types import BacklogLocation

        delivery = Subscription.DeliveryConfig(
            delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)
        self.connection.admin(self.region).create_subscription(
            Subscription(name=path, topic=str(self.topic_path), delivery_config=delivery), BacklogLocation.BEGINNING)

    def commit(self, path: str, partition: int, offset: int) -> None:
        if self._cursor_service is None:  # kept: a copy commits every second
            self._cursor_service = self.connection.cursor_service(self.region)
        self._cursor_service.commit_cursor(request={
            "subscription": path, "partition": partition, "cursor": {"offset": offset}})

    def heads(self, partitions: int) -> dict[int, int]:
        stats = self.connection.topic_stats_service(self.region)
        return {p: stats.compute_head_cursor(request={"topic": str(self.topic_path), "partition": p}).head_cursor.offset
                for p in range(partitions)}

    def retained(self, partition: int, start: int, end: int) -> int:
        """How many messages Lite still holds in [start, end) of a partition."""
        if start >= end:
            return 0
        stats = self.connection.topic_stats_service(self.region)
        return stats.compute_message_stats(request={
            "topic": str(self.topic_path), "partition": partition, "start_cursor": {"offset": start},
            "end_cursor": {"offset": end}}).message_count


async def read_messages(client, through: str, partition: int, start: int, end: int) -> AsyncIterator[list]:
    """Lists of raw SequencedMessages of [start, end) in offset order, read through subscription `through`;
    offsets retention dropped are skipped."""
    async for batch in read_partition(client, through, partition, start, end, READ_AHEAD_MESSAGES,
                                      READ_AHEAD_BYTES, {}):
        yield batch


def run_reads(connection: LiteConnection, region, reads) -> list:
    """Runs `reads(client)` (a coroutine function) on a new event loop with one async subscriber client."""

    async def main():
        client = connection.async_subscriber_service(region)
        try:
            return await reads(client)
        finally:
            await client.transport.close()

    return asyncio.run(main())
