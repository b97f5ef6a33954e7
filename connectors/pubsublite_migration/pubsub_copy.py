"""Copies Lite partitions to a Cloud Pub/Sub topic. Pub/Sub cannot be read back for a position, so the copy's
position is the cursor of a Lite subscription of its own: committed every second up to the first message Pub/Sub
has not acknowledged. Publishing is not idempotent: a run killed between Pub/Sub's acknowledgement and that commit
publishes up to about a second of messages again (with the same `lite.partition` and `lite.offset`)."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Callable

from connectors.cloud_pubsub.request_publisher import PublishFailed
from connectors.errors import BatchError
from connectors.pubsublite_migration.copy import FLUSH_TIMEOUT_S, PartitionCopy
from connectors.pubsublite_migration.lite_side import LiteSide, read_messages, run_reads
from connectors.pubsublite_migration.pubsub_side import PubSubSide, pubsub_message

COMMIT_EVERY_S = 1.0


class _Acknowledged:
    """One partition's published offsets in order; `next` is the first not yet acknowledged by Pub/Sub (what the
    position may say). Acknowledgements come out of order: requests of different ordering keys overlap."""

    def __init__(self, start: int):
        self.sent: collections.deque[int] = collections.deque()
        self.acked: set[int] = set()
        self.next = start

    def add(self, offset: int) -> None:
        self.sent.append(offset)

    def ack(self, offset: int) -> None:
        self.acked.add(offset)
        while self.sent and self.sent[0] in self.acked:
            self.acked.remove(first := self.sent.popleft())
            self.next = first + 1


def copy_to_pubsub(lite: LiteSide, position: str, pubsub: PubSubSide, copies: list[PartitionCopy],
                   cursors: dict[str, dict[int, int]],
                   progress: Callable[[int, int], None] = lambda p, n: None) -> None:
    """Publishes every [start, end) range, all partitions at once, reading through (and committing to) the
    `position` subscription. `cursors` are the carried Lite subscriptions' (by short name): a message before a
    subscription's cursor is marked as acknowledged by it. Raises naming the first message Pub/Sub refused or
    the copy could not carry; everything acknowledged before it stays, and its position is committed."""
    by_partition = {c.partition: c for c in copies}
    acknowledged = {c.partition: _Acknowledged(c.start) for c in copies}
    committed = {c.partition: c.start for c in copies}
    refused: list[str] = []

    def on_acked(origins: list) -> None:
        nonlocal last_commit
        for partition, offset in origins:
            acknowledged[partition].ack(offset)
            by_partition[partition].copied += 1
            progress(partition, 1)
        # Here rather than in the read loop: the last ten thousand messages are acknowledged while the publisher
        # closes, after every read has ended.
        if time.monotonic() - last_commit >= COMMIT_EVERY_S:
            commit_moved()
            last_commit = time.monotonic()

    def on_rejected(origin, message, error: Exception) -> None:
        refused.append(f"Lite partition {origin[0]} offset {origin[1]}: {error}")

    def commit_moved() -> None:
        for partition, acked in acknowledged.items():
            if acked.next > committed[partition]:
                lite.commit(position, partition, acked.next)
                committed[partition] = acked.next

    last_commit = time.monotonic()
    publisher = pubsub.publisher(on_acked, on_rejected)

    async def copy_one(client, copy: PartitionCopy) -> None:
        partition = copy.partition
        async for batch in read_messages(client, position, partition, copy.start, copy.end):
            for sequenced in batch:
                offset = sequenced.cursor.offset
                acked_by = [name for name, at in cursors.items() if offset < at[partition]]
                message = pubsub_message(sequenced, partition, acked_by)
                acknowledged[partition].add(offset)
                publisher.add(message, message.ByteSize(), (partition, offset), message.ordering_key)
            if refused:
                raise BatchError(f"Pub/Sub topic {pubsub.topic} refused a message: {refused[0]}")
            await asyncio.sleep(0)  # the other partitions' reads

    async def copy_all(client) -> list:
        return await asyncio.gather(*(copy_one(client, c) for c in copies if c.start < c.end))

    failure: Exception | None = None
    try:
        run_reads(lite.connection, lite.region, copy_all)
    except Exception as exc:  # what was published before it is still waited for, and committed
        failure = exc
    try:
        publisher.close(FLUSH_TIMEOUT_S)
    except (PublishFailed, TimeoutError) as exc:
        failure = failure or BatchError(f"{exc}; run the migration again: it goes on from its position")
    finally:
        commit_moved()
    if failure is not None:
        raise failure
    if refused:
        raise BatchError(f"Pub/Sub topic {pubsub.topic} refused {len(refused)} messages: {'; '.join(refused[:3])}")
