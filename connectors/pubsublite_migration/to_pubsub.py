"""A Lite topic's migration to Cloud Pub/Sub: the plan, the subscriptions, the copy and the verification.

Pub/Sub gives a subscription only what is published after it exists, and a subscription cannot be set to an
offset. So each carried Lite subscription's Pub/Sub subscription is created before the first message is
published, with a filter that drops what its Lite subscription had acknowledged when the message was copied
(the `lite.acked.<subscription>` marker). What a Lite subscription acknowledges after its messages were copied is
delivered again on Pub/Sub: stop the Lite consumers before the last run for an exact hand-over. An unfiltered
check subscription keeps every copied message for the verification, which reads it without acknowledging."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

from connectors.pubsublite_migration.copy import PartitionCopy
from connectors.pubsublite_migration.lite_side import LiteSide, LiteTopic, read_messages, run_reads
from connectors.pubsublite_migration.names import (
    DEFAULT_NAME_FORMAT, chosen_subscriptions, position_subscription, target_name,
)
from connectors.pubsublite_migration.pubsub_copy import copy_to_pubsub
from connectors.pubsublite_migration.pubsub_side import CHECK_ACK_DEADLINE_S, PubSubSide, acked_filter

HASH_MODULUS = 1 << 128


@dataclass
class SubscriptionMove:
    subscription: str  # the Lite subscription's path
    pubsub_subscription: str
    cursors: dict[int, int] = field(default_factory=dict)  # Lite partition -> committed cursor
    exists: bool = False  # the Pub/Sub subscription, with the migration's filter
    outcome: str = ""

    @property
    def filter(self) -> str:
        return acked_filter(self.subscription)


@dataclass
class PubSubPlan:
    topic: LiteTopic
    pubsub_topic: str
    pubsub_topic_exists: bool
    position: str  # the Lite subscription holding the copy's position
    started: bool  # the position exists: an earlier run began the copy
    copies: list[PartitionCopy]
    subscriptions: list[SubscriptionMove]
    check_subscription: str

    @property
    def to_copy(self) -> int:
        return sum(c.to_copy for c in self.copies)


@dataclass
class PubSubPartitionCheck:
    partition: int
    published: int  # distinct Lite offsets on Pub/Sub
    copies: int  # messages published more than once, past the first (a killed run's)
    lite_records: int  # what Lite holds of the copied range
    first_lite_offset: int | None
    last_lite_offset: int | None
    pubsub_hash: str
    lite_hash: str
    pubsub_only: int  # copied messages Lite has since dropped (its retention)
    not_copied: int  # messages Lite holds past the copy

    @property
    def ok(self) -> bool:
        return self.pubsub_hash == self.lite_hash and self.published - self.pubsub_only == self.lite_records \
            and self.not_copied == 0


@dataclass
class SubscriptionCheck:
    subscription: str
    pubsub_subscription: str
    partition: int
    lite_cursor: int
    exists: bool  # with the migration's filter
    first_offset: int | None  # the first copied offset it is given
    delivered_again: int  # given though Lite's cursor is past them now (acknowledged after the copy)
    missing: int  # not given though Lite's cursor is not past them

    @property
    def ok(self) -> bool:
        return self.exists and self.missing == 0


class PubSubMigration:
    def __init__(self, lite: LiteSide, pubsub: PubSubSide):
        self.lite, self.pubsub = lite, pubsub

    def plan(self, subscriptions: list[str] | None, subscription_format: str = DEFAULT_NAME_FORMAT) -> PubSubPlan:
        topic = self.lite.describe()
        position = position_subscription(topic.path, self.pubsub.topic_id)
        plan = PubSubPlan(topic, self.pubsub.topic, self.pubsub.topic_exists(), position,
                          self.lite.subscription_exists(position), [],
                          [SubscriptionMove(s, self.pubsub.subscription_path(
                              target_name(subscription_format, s, "--subscription-format")))
                           for s in chosen_subscriptions(topic, subscriptions)],
                          self.pubsub.check_subscription)
        for move in plan.subscriptions:
            move.exists = self._has_filter(move.pubsub_subscription, move.filter, plan.started)
        self._has_filter(plan.check_subscription, "", plan.started)
        self._read_positions(plan)
        return plan

    def _has_filter(self, path: str, expected: str, started: bool) -> bool:
        """Whether the Pub/Sub subscription exists as the migration makes it; refuses one it cannot use."""
        found = self.pubsub.subscription_filter(path)
        if found is None and started:
            raise ValueError(f"Pub/Sub subscription {path} does not exist, and this migration has already copied "
                             "messages it would never get (Pub/Sub gives a subscription only what is published after "
                             "it exists): carry every subscription from the first run, or start again with a new "
                             "Pub/Sub topic")
        if found is not None and found != expected:
            raise ValueError(f"Pub/Sub subscription {path} exists with filter {found!r}; the migration needs "
                             f"{expected!r}: delete it, or name the subscriptions otherwise (--subscription-format)")
        return found is not None

    def _read_positions(self, plan: PubSubPlan) -> None:
        partitions = plan.topic.partitions
        heads = self.lite.heads(partitions)
        starts = self.lite.subscription(plan.position, partitions).cursors if plan.started \
            else dict.fromkeys(range(partitions), 0)
        plan.copies = [PartitionCopy(p, starts[p], heads[p], self.lite.retained(p, starts[p], heads[p]))
                       for p in range(partitions)]
        for move in plan.subscriptions:
            move.cursors = self.lite.subscription(move.subscription, partitions).cursors

    def copy_and_subscribe(self, plan: PubSubPlan, progress: Callable[[int, int], None] = lambda p, n: None) -> None:
        """Creates the Pub/Sub topic and subscriptions that are missing and the copy's position, then copies what
        is left, marking each message for the Lite subscriptions that had acknowledged it."""
        if not plan.pubsub_topic_exists:
            self.pubsub.create_topic()
            plan.pubsub_topic_exists = True
        for move in plan.subscriptions:
            move.outcome = "exists"
            if not move.exists:
                self.pubsub.create_subscription(move.pubsub_subscription, move.filter, ordered=True)
                move.exists, move.outcome = True, "created"
        if self.pubsub.subscription_filter(plan.check_subscription) is None:
            self.pubsub.create_subscription(plan.check_subscription, "", ordered=False,
                                            ack_deadline_s=CHECK_ACK_DEADLINE_S)
        if not plan.started:
            self.lite.create_subscription(plan.position)
            plan.started = True
        self._read_positions(plan)  # the cursors as they are now, just before the copy
        cursors = {m.subscription.rsplit("/", 1)[-1]: m.cursors for m in plan.subscriptions}
        copy_to_pubsub(self.lite, plan.position, self.pubsub, plan.copies, cursors, progress)

    def verify(self, plan: PubSubPlan) -> tuple[list[PubSubPartitionCheck], list[SubscriptionCheck]]:
        """Lite's copied range per partition against what the check subscription holds (count, offsets, a hash of
        offsets, keys and data that does not depend on Pub/Sub's order), and per carried subscription, what its
        filter gives against its Lite cursor now."""
        partitions = plan.topic.partitions
        heads = self.lite.heads(partitions)
        copied_to = self.lite.subscription(plan.position, partitions).cursors if plan.started \
            else dict.fromkeys(range(partitions), 0)
        lite = {p: self._hash_lite(plan, p, copied_to[p]) for p in range(partitions)}
        cursors = {m.subscription: self.lite.subscription(m.subscription, partitions).cursors
                   for m in plan.subscriptions}
        # A byte per copied offset (100 MB for 100 million messages) tells copies from first sightings.
        seen = {p: bytearray(copied_to[p]) for p in range(partitions)}
        tally = {p: {"published": 0, "copies": 0, "pubsub_only": 0, "hash": 0} for p in range(partitions)}
        given: dict[tuple[str, int], list[int]] = {}  # (subscription, partition) -> [first, again, missing]
        if plan.started:
            for message in self.pubsub.read_check_subscription():
                if message is None or message.partition not in seen or message.offset >= copied_to[message.partition]:
                    continue
                p, offset, t = message.partition, message.offset, tally[message.partition]
                if seen[p][offset]:
                    t["copies"] += 1
                    continue
                seen[p][offset] = 1
                t["published"] += 1
                if offset < lite[p][1]:
                    t["pubsub_only"] += 1
                else:
                    t["hash"] = (t["hash"] + _digest(offset, message.key, message.data)) % HASH_MODULUS
                for move in plan.subscriptions:
                    counts = given.setdefault((move.subscription, p), [None, 0, 0])
                    short = move.subscription.rsplit("/", 1)[-1]
                    behind_cursor = offset < cursors[move.subscription][p]
                    if short in message.acked_by:
                        counts[2] += not behind_cursor
                    else:
                        counts[0] = offset if counts[0] is None else min(counts[0], offset)
                        counts[1] += behind_cursor
        checks = []
        for p in range(partitions):
            lite_hash, held_from, lite_records, first = lite[p]
            t = tally[p]
            checks.append(PubSubPartitionCheck(
                p, t["published"], t["copies"], lite_records, first, copied_to[p] - 1 if first is not None else None,
                f"{t['hash']:032x}"[:16] if t["published"] else "", lite_hash, t["pubsub_only"],
                self.lite.retained(p, copied_to[p], heads[p])))
        subscription_checks = [
            SubscriptionCheck(m.subscription, m.pubsub_subscription, p, cursors[m.subscription][p],
                              self.pubsub.subscription_filter(m.pubsub_subscription) == m.filter,
                              *given.get((m.subscription, p), [None, 0, 0]))
            for m in plan.subscriptions for p in range(partitions)]
        return checks, subscription_checks

    def _hash_lite(self, plan: PubSubPlan, partition: int, copied_to: int) -> tuple[str, int, int, int | None]:
        """Lite's copied range [0, copied_to) of a partition: its hash, where Lite's retention now starts, how many
        messages it holds, and the first copied offset (None when nothing was copied)."""

        async def hash_lite(client) -> tuple[int, int, int | None]:
            total, count, held_from = 0, 0, None
            async for batch in read_messages(client, plan.position, partition, 0, copied_to):
                held_from = batch[0].cursor.offset if held_from is None else held_from
                count += len(batch)
                for m in batch:
                    total = (total + _digest(m.cursor.offset, bytes(m.message.key), bytes(m.message.data))) \
                        % HASH_MODULUS
            return total, count, held_from

        if copied_to <= 0:
            return "", copied_to, 0, None
        total, count, held_from = run_reads(self.lite.connection, self.lite.region, hash_lite)
        held_from = copied_to if held_from is None else held_from
        return (f"{total:032x}"[:16] if count else ""), held_from, count, held_from if count else None


def _digest(offset: int, key: bytes, data: bytes) -> int:
    """One message's share of an order-free hash: the sum of these, modulo 2**128, over distinct offsets."""
    digest = hashlib.sha256(offset.to_bytes(8, "big") + len(key).to_bytes(4, "big") + key + data).digest()
    return int.from_bytes(digest[:16], "big")
