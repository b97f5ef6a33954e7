"""What the Kafka-facing connector plugins declare alike: Kafka offsets as the position, the lag signal, the
topics read and written, and the report of a Kafka sink's batch (sink_plugin.KafkaSink's and the streams')."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connectors import endpoints
from connectors.endpoints import Endpoint
from connectors.framework.latency import LATENCY_FIELDS
from connectors.plugin import (
    BatchReport, PartitionKey, Place, Position, ReportKeys, Signal, SourcePlaces, Systems, Table, Waiting,
)

if TYPE_CHECKING:  # Spark and Arrow are imported by runs, not by the code location's load
    from connectors.plugin import Bridge
    from connectors.kafka.admin import BatchPlan, Offsets
    from connectors.framework.sink_batch import SinkBatchResult


def _offsets_from_json(value: Any) -> Offsets:
    # JSON object keys are strings; partitions are ints everywhere else.
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in (value or {}).items()}


def _offsets_to_json(offsets: Offsets) -> dict:
    return {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())}


def _kafka_places(systems: Systems, bridge: Bridge, position: Offsets) -> tuple[Place, ...]:
    """Each partition of the bridge's topics: the recorded offset, where the next run starts (as a batch plans it:
    past a part a killed run delivered, and where `batch.initial_offsets` puts a partition never recorded), the
    oldest offset kept and the end (the last stable offset under read_committed)."""
    from connectors.framework.delivered import past_delivered

    config, recorded = bridge.config, position or {}
    admin = systems.kafka.admin()
    partitions = admin.partitions(config.topic_list() or None, config.topics_regex)
    plan = admin.plan_batch(partitions, past_delivered(admin, bridge.consumer_group, partitions, recorded), 0,
                            bridge.batch.initial_offsets, bridge.consumer_group, config.isolation_level)
    starts = admin.start_offsets(partitions)
    return tuple(Place(topic, partition, recorded.get(topic, {}).get(partition), plan.next_offsets[topic][partition],
                       starts[topic][partition], plan.end_offsets[topic][partition])
                 for topic in sorted(partitions) for partition in sorted(partitions[topic]))


def _kafka_moved(position: Offsets, moves: dict[PartitionKey, int]) -> Offsets:
    moved = {topic: dict(parts) for topic, parts in (position or {}).items()}
    for (topic, partition), offset in moves.items():
        moved.setdefault(topic, {})[partition] = offset
    return moved


def _kafka_offsets_at(systems: Systems, bridge: Bridge, epoch_ms: int) -> dict[PartitionKey, int]:
    config, admin = bridge.config, systems.kafka.admin()
    found = admin.offsets_at_time(admin.partitions(config.topic_list() or None, config.topics_regex), epoch_ms)
    return {(topic, partition): offset for topic, parts in found.items() for partition, offset in parts.items()}


def _kafka_mirror(systems: Systems, bridge: Bridge, position: Offsets) -> None:
    """Kafka Connect's group (`connect-<name>`) to the new position, committed without our metadata: a run then
    starts from the recorded position, not from a delivered part past it (delivered.past_delivered)."""
    systems.kafka.admin().commit_group(bridge.consumer_group, {
        (topic, partition): offset for topic, parts in position.items() for partition, offset in parts.items()})


# Next offset to read per topic-partition.
KAFKA_OFFSETS = Position("kafka_offsets", _offsets_to_json, _offsets_from_json, source=SourcePlaces(
    places=_kafka_places, moved=_kafka_moved, offsets_at=_kafka_offsets_at, mirror=_kafka_mirror))


def kafka_source_label(config) -> str:
    return config.topics or f"/{config.topics_regex}/"


def kafka_topics_read(bridge: Bridge, systems: Systems) -> tuple[Endpoint, ...]:
    # A topics.regex source matches topics that may not exist yet: it has no endpoint to draw.
    return tuple(endpoints.kafka_topic(t) for t in bridge.config.topic_list())


def kafka_topic_written(bridge: Bridge) -> tuple[Endpoint, ...]:
    return (endpoints.kafka_topic(bridge.config.kafka_topic),)


def _kafka_lag(systems: Systems, bridge: Bridge, position: Offsets) -> Waiting:
    """Records past `position` in the bridge's topics (two admin calls, no consuming)."""
    config = bridge.config
    admin = systems.kafka.admin()
    partitions = admin.partitions(config.topic_list() or None, config.topics_regex)
    plan = admin.plan_batch(partitions, position or {}, 2**62, bridge.batch.initial_offsets, bridge.consumer_group,
                            config.isolation_level)
    return Waiting(plan.total_records, plan.end_offsets)


KAFKA_LAG = Signal("lag", ("kafka",), _kafka_lag)


def partitions_table(plan: BatchPlan, per_partition: dict[str, dict[str, int]], counters: tuple[str, ...]) -> Table:
    """Per topic-partition, readable at a glance: where the bridge is, how far behind, what this batch moved."""
    rows = []
    for topic in sorted(plan.end_offsets):
        for partition in sorted(plan.end_offsets[topic]):
            next_offset, counts = plan.next_offsets[topic][partition], per_partition.get(f"{topic}-{partition}", {})
            rows.append({"topic": topic, "partition": partition, "next_offset": next_offset,
                         "lag": plan.end_offsets[topic][partition] - next_offset,
                         **{name: counts.get(name, 0) for name in counters}})
    columns = (("topic", "string"), ("partition", "int"), ("next_offset", "int"), ("lag", "int"),
               *((name, "int") for name in counters))
    return Table(columns, tuple(rows))


SINK_KEYS = ReportKeys("records", read="records_read", delivered="records_published", lag="lag_remaining",
                       rejected=("records_dead_lettered", "records_dropped", "records_dead_letter_refused"),
                       counted=(("records_dead_lettered", "records_dead_lettered"), ("records_dropped", "records_dropped"),
                                ("records_dead_letter_refused", "records_dead_letter_refused"),
                                ("records_skipped", "records_skipped"), ("bytes_read", "bytes_read")))
_SINK_COUNTERS = ("records_read", "records_published", "records_skipped", "records_dead_lettered", "records_dropped",
                  "records_dead_letter_refused", "bytes_read", "headers_dropped", "delivery_latency")


def sink_report(result: SinkBatchResult) -> BatchReport:
    t = result.totals
    values = {
        "records_read": t["records"],
        "records_published": t["published"],
        "records_skipped": t["skipped"],
        "records_dead_lettered": t["dead_lettered"],
        "records_dropped": t["failed_dropped"],
        "records_dead_letter_refused": t["dead_letter_refused"],
        "bytes_read": t["bytes"],
        "headers_dropped": t["headers_dropped"],
        # Send-to-arrival: each record's Kafka timestamp to its acknowledgement, in buckets (connectors/framework/latency.py).
        "delivery_latency": {name: t[name] for name in LATENCY_FIELDS},
        "duration_seconds": round(result.duration_s, 3),
        "records_per_second": round(result.records_per_second, 1),
        "lag_remaining": result.plan.lag_after(),
        "partitions": partitions_table(result.plan, result.per_partition, ("records", "published", "dead_lettered")),
    }
    if result.dead_letter_refusals:
        values["dead_letter_refusals"] = list(result.dead_letter_refusals)
    if result.plan.skipped_by_retention:
        values["records_lost_to_retention"] = dict(result.plan.skipped_by_retention)
    warnings = []
    if t["dead_letter_refused"]:
        warnings.append(f"{t['dead_letter_refused']} records were refused by the dead-letter topic too and skipped "
                        "(errors.tolerance=all): " + "; ".join(result.dead_letter_refusals[:3]))
    if t["headers_dropped"]:
        warnings.append(f"{t['headers_dropped']} headers could not become attributes (over the attribute limits, "
                        "binary, null or a repeated key) and were dropped")
    line = (f"{t['records']} records read, {t['published']} published in {result.duration_s:.1f}s; "
            f"{result.plan.lag_after()} left for the next batch")
    return BatchReport(t["published"], result.next_offsets, values, _SINK_COUNTERS, line, tuple(warnings),
                       result.duration_s)

