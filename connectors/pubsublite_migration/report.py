"""The migration's plan and verification as rows of named columns, for the terminal's tables and the Dagster
job's table metadata alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the job's definition imports this module; the copy's machinery only when a run starts
    from connectors.pubsublite_migration.migrate import GroupCheck, MigrationPlan, PartitionCheck
    from connectors.pubsublite_migration.to_pubsub import PubSubPartitionCheck, PubSubPlan, SubscriptionCheck


def plan_rows(plan: MigrationPlan | PubSubPlan) -> list[dict[str, str]]:
    return [{"partition": str(c.partition), "copy from Lite offset": f"{c.start:,}", "Lite head": f"{c.end:,}",
             "to copy": f"{c.to_copy:,}"} for c in plan.copies]


def plan_group_rows(plan: MigrationPlan) -> list[dict[str, str]]:
    rows = []
    for move in plan.groups:
        for p, cursor in sorted(move.cursors.items()):
            now = move.committed_before.get(p)
            rows.append({"subscription": _short(move.subscription), "group": move.group, "partition": str(p),
                         "Lite cursor": f"{cursor:,}", "group's offset now": "none" if now is None else f"{now:,}",
                         "consumers in the group": str(move.members)})
    return rows


def partition_rows(checks: list[PartitionCheck]) -> list[dict[str, str]]:
    return [{"partition": str(c.partition), "Kafka records": f"{c.kafka_records:,}",
             "Lite records": f"{c.lite_records:,}",
             "Lite offsets": "-" if c.first_lite_offset is None else f"{c.first_lite_offset:,}..{c.last_lite_offset:,}",
             "Kafka hash": c.kafka_hash, "Lite hash": c.lite_hash, "only on Kafka": f"{c.kafka_only:,}",
             "not copied": f"{c.not_copied:,}", "matches": _yes(c.ok)} for c in checks]


def group_rows(checks: list[GroupCheck]) -> list[dict[str, str]]:
    return [{"subscription": _short(g.subscription), "group": g.group, "partition": str(g.partition),
             "Lite cursor": f"{g.lite_cursor:,}", "expected offset": f"{g.expected_offset:,}",
             "group's offset": "none" if g.group_offset is None else f"{g.group_offset:,}",
             "behind": f"{g.behind:,}", "matches": _yes(g.ok)} for g in checks]


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def pubsub_plan_subscription_rows(plan: PubSubPlan) -> list[dict[str, str]]:
    rows = []
    for move in plan.subscriptions:
        for p, cursor in sorted(move.cursors.items()):
            rows.append({"subscription": _short(move.subscription), "Pub/Sub subscription": _short(
                move.pubsub_subscription), "partition": str(p), "Lite cursor": f"{cursor:,}",
                "Pub/Sub subscription now": "exists" if move.exists else "created, filtered"})
    return rows


def pubsub_partition_rows(checks: list[PubSubPartitionCheck]) -> list[dict[str, str]]:
    return [{"partition": str(c.partition), "on Pub/Sub": f"{c.published:,}", "copies": f"{c.copies:,}",
             "Lite records": f"{c.lite_records:,}",
             "Lite offsets": "-" if c.first_lite_offset is None else f"{c.first_lite_offset:,}..{c.last_lite_offset:,}",
             "Pub/Sub hash": c.pubsub_hash, "Lite hash": c.lite_hash, "only on Pub/Sub": f"{c.pubsub_only:,}",
             "not copied": f"{c.not_copied:,}", "matches": _yes(c.ok)} for c in checks]


def subscription_rows(checks: list[SubscriptionCheck]) -> list[dict[str, str]]:
    return [{"subscription": _short(s.subscription), "Pub/Sub subscription": _short(s.pubsub_subscription),
             "partition": str(s.partition), "Lite cursor": f"{s.lite_cursor:,}",
             "first offset it gets": "-" if s.first_offset is None else f"{s.first_offset:,}",
             "delivered again": f"{s.delivered_again:,}", "missing": f"{s.missing:,}" if s.exists else "no subscription",
             "matches": _yes(s.ok)} for s in checks]
