"""A Lite topic's migration to Kafka: the plan (what is left to copy, which groups get which offsets), the copy,
the groups' offsets, and the verification. Re-runs copy only what is new and move groups forward only."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

from connectors.pubsublite_migration.copy import PartitionCopy, copy_partitions
from connectors.pubsublite_migration.kafka_side import KafkaSide
from connectors.pubsublite_migration.lease import CopyLease
from connectors.pubsublite_migration.lite_side import LiteSide, LiteTopic, read_messages, run_reads
from connectors.pubsublite_migration.names import DEFAULT_NAME_FORMAT, chosen_subscriptions, target_name



@dataclass
class GroupMove:
    subscription: str  # full path
    group: str
    cursors: dict[int, int]  # Lite partition -> committed cursor
    targets: dict[int, int] = field(default_factory=dict)  # Kafka partition -> offset the cursor maps to
    committed_before: dict[int, int] = field(default_factory=dict)  # the group's offsets before this run
    members: int = 0
    outcome: str = ""  # what happened to the group, for the report


@dataclass
class MigrationPlan:
    topic: LiteTopic
    kafka_topic: str
    kafka_partitions: int | None  # None: the topic does not exist yet
    through: str  # the subscription the copy reads through
    copies: list[PartitionCopy]
    groups: list[GroupMove]

    @property
    def to_copy(self) -> int:
        return sum(c.to_copy for c in self.copies)


@dataclass
class PartitionCheck:
    partition: int
    kafka_records: int
    lite_records: int  # what Lite holds of the copied range
    first_lite_offset: int | None
    last_lite_offset: int | None
    kafka_hash: str
    lite_hash: str
    kafka_only: int  # copied records Lite has since dropped (its retention)
    not_copied: int  # messages Lite holds past the copy

    @property
    def ok(self) -> bool:
        return self.kafka_hash == self.lite_hash and self.kafka_records - self.kafka_only == self.lite_records \
            and self.not_copied == 0


@dataclass
class GroupCheck:
    subscription: str
    group: str
    partition: int
    lite_cursor: int
    expected_offset: int
    group_offset: int | None
    behind: int  # records on Kafka past the group's offset

    @property
    def ok(self) -> bool:
        return self.group_offset is not None and self.group_offset >= self.expected_offset


def kafka_topic_config(topic: LiteTopic) -> dict[str, str]:
    """The Kafka topic keeps what the Lite topic keeps: its retention period (or none) and bytes per partition."""
    return {"retention.ms": str(topic.retention_period_ms or -1),
            "retention.bytes": str(topic.retention_bytes_per_partition or -1)}


class Migration:
    """Use it in a `with` block: its Kafka reader is closed at the end."""

    def __init__(self, lite: LiteSide, kafka: KafkaSide):
        self.lite, self.kafka = lite, kafka

    def __enter__(self) -> "Migration":
        return self

    def __exit__(self, *exc) -> None:
        self.kafka.close()

    def plan(self, subscriptions: list[str] | None, group_format: str = DEFAULT_NAME_FORMAT) -> MigrationPlan:
        topic = self.lite.describe()
        chosen = chosen_subscriptions(topic, subscriptions)
        kafka_partitions = self.kafka.partitions()
        if kafka_partitions is not None and kafka_partitions != topic.partitions:
            raise ValueError(f"Kafka topic {self.kafka.topic} has {kafka_partitions} partitions and Lite topic "
                             f"{topic.path} {topic.partitions}: partition p is copied to partition p, so they must "
                             "be equal")
        through = (chosen or topic.subscriptions or ("",))[0]
        if not through:
            raise ValueError(f"Lite topic {topic.path} has no subscription: Lite reads only through one; create one "
                             "(it need not be used otherwise) and run again")
        plan = MigrationPlan(topic, self.kafka.topic, kafka_partitions, through, [],
                             [GroupMove(s, target_name(group_format, s, "--group-format"), {}) for s in chosen])
        self._read_positions(plan)
        return plan

    def _read_positions(self, plan: MigrationPlan) -> None:
        """What is left to copy per partition (from the last `lite.offset` in Kafka to Lite's head now), and each
        group's subscription cursors, members and offsets now."""
        partitions = plan.topic.partitions
        heads = self.lite.heads(partitions)
        bounds = self.kafka.bounds(partitions) if plan.kafka_partitions else {}
        plan.copies = []
        for p in range(partitions):
            first, end = bounds.get(p, (0, 0))
            last = self.kafka.last_copied(p, first, end) if plan.kafka_partitions else None
            start = 0 if last is None else last + 1
            plan.copies.append(PartitionCopy(p, start, heads[p], self.lite.retained(p, start, heads[p])))
        for move in plan.groups:
            move.cursors = self.lite.subscription(move.subscription, partitions).cursors
            move.members = self.kafka.admin.group_members(move.group)
            move.committed_before = self._group_offsets(plan, move.group)

    def _group_offsets(self, plan: MigrationPlan, group: str) -> dict[int, int]:
        """The group's committed offsets on the Kafka topic, per partition (none before the topic exists)."""
        if not plan.kafka_partitions:
            return {}
        partitions = {plan.kafka_topic: list(range(plan.topic.partitions))}
        return self.kafka.admin.committed_offsets(group, partitions).get(plan.kafka_topic, {})

    def copy_and_move_groups(self, plan: MigrationPlan,
                             progress: Callable[[int, int], None] = lambda p, n: None) -> None:
        """Creates the Kafka topic when missing, then, under the topic's lease (one migration writing it at a time),
        reads the positions again (another migration may have written since the plan), copies what is left and
        commits each subscription's place to its group."""
        if plan.kafka_partitions is None:
            self.kafka.create(plan.topic.partitions, kafka_topic_config(plan.topic))
            plan.kafka_partitions = plan.topic.partitions
        client_config = self.kafka.admin.connection.librdkafka_config()
        with CopyLease(client_config, plan.kafka_topic) as lease:
            self._read_positions(plan)
            copy_partitions(self.lite, plan.through, client_config, plan.kafka_topic, plan.copies, progress)
            lease.check()  # the groups move only while the lease is surely ours
            self._move_groups(plan)

    def _move_groups(self, plan: MigrationPlan) -> None:
        """Commits each subscription's place to its group: forward only, and never to a group with members."""
        bounds = self.kafka.bounds(plan.topic.partitions)
        for move in plan.groups:
            move.targets = {p: self.kafka.offset_for(p, cursor, *bounds[p]) for p, cursor in move.cursors.items()}
            if move.members:
                move.outcome = f"not touched: {move.members} consumers are in the group on Kafka"
                continue
            forward = {(plan.kafka_topic, p): offset for p, offset in move.targets.items()
                       if offset > move.committed_before.get(p, -1)}
            if forward:
                self.kafka.admin.commit_group(move.group, forward)
            kept = len(move.targets) - len(forward)
            move.outcome = f"committed {len(forward)} partitions" + (
                f", {kept} kept (already at or past the Lite cursor)" if kept else "")

    def verify(self, plan: MigrationPlan) -> tuple[list[PartitionCheck], list[GroupCheck]]:
        """Compares both sides now: per partition, the records Lite still holds against Kafka's copy (count, Lite
        offsets, a hash of keys and data), and per subscription, its Lite cursor against its group's offset."""
        partitions = plan.topic.partitions
        heads = self.lite.heads(partitions)
        bounds = self.kafka.bounds(partitions) if plan.kafka_partitions else {p: (0, 0) for p in range(partitions)}
        checks = [self._check_partition(plan, p, heads[p], *bounds[p]) for p in range(partitions)]
        group_checks = []
        for move in plan.groups:
            cursors = self.lite.subscription(move.subscription, partitions).cursors
            committed = self._group_offsets(plan, move.group)
            for p in range(partitions):
                expected = self.kafka.offset_for(p, cursors[p], *bounds[p])
                offset = committed.get(p)
                group_checks.append(GroupCheck(move.subscription, move.group, p, cursors[p], expected, offset,
                                               bounds[p][1] - (offset if offset is not None else bounds[p][0])))
        return checks, group_checks

    def _check_partition(self, plan: MigrationPlan, partition: int, head: int, first: int, end: int) -> PartitionCheck:
        """Both sides hashed as they stream by: Lite's copied range first (where its retention now starts is only
        known from its first message), then Kafka's records from that Lite offset on."""
        if end <= first:
            return PartitionCheck(partition, 0, 0, None, None, "", "", 0, self.lite.retained(partition, 0, head))
        copied_from = self.kafka.record_at(partition, first).lite_offset
        copied_to = self.kafka.record_at(partition, end - 1).lite_offset + 1
        lite_hash, kafka_hash = hashlib.sha256(), hashlib.sha256()

        async def hash_lite(client) -> tuple[int, int | None]:
            count, held_from = 0, None
            async for batch in read_messages(client, plan.through, partition, copied_from, copied_to):
                held_from = batch[0].cursor.offset if held_from is None else held_from
                count += len(batch)
                for m in batch:
                    _add(lite_hash, bytes(m.message.key), bytes(m.message.data))
            return count, held_from

        lite_records, held_from = run_reads(self.lite.connection, self.lite.region, hash_lite)
        held_from = copied_to if held_from is None else held_from
        kafka_records = kafka_only = 0
        for record in self.kafka.records(partition, first, end):
            kafka_records += 1
            if record.lite_offset < held_from:
                kafka_only += 1
            else:
                _add(kafka_hash, record.key, record.value)
        return PartitionCheck(partition, kafka_records, lite_records, copied_from, copied_to - 1,
                              kafka_hash.hexdigest()[:16], lite_hash.hexdigest()[:16], kafka_only,
                              self.lite.retained(partition, copied_to, head))


def _add(digest, key: bytes, data: bytes) -> None:
    digest.update(len(key).to_bytes(4, "big") + key + len(data).to_bytes(4, "big") + data)
