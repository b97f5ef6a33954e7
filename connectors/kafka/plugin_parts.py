"""What the Kafka-facing connector plugins declare alike: Kafka offsets as the position, the lag signal, the
topics read and written, and the report of a Kafka sink's batch (sink_plugin.KafkaSink's and the streams')."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connectors import endpoints
from connectors.endpoints import Endpoint
from connectors.kafka.latency import LATENCY_FIELDS
from connectors.plugin import BatchReport, ReportKeys, Position, Signal, Systems, Table, Waiting

if TYPE_CHECKING:  # Spark and Arrow are imported by runs, not by the code location's load
    from connectors.plugin import Bridge
    from connectors.kafka.admin import BatchPlan, Offsets
    from connectors.kafka.sink_batch import SinkBatchResult


def _offsets_from_json(value: Any) -> Offsets:
    # JSON object keys are strings; partitions are ints everywhere else.
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in (value or {}).items()}


def _offsets_to_json(offsets: Offsets) -> dict:
    return {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())}


# Next offset to read per topic-partition.
KAFKA_OFFSETS = Position("kafka_offsets", _offsets_to_json, _offsets_from_json)


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
        # Send-to-arrival: each record's Kafka timestamp to its acknowledgement, in buckets (connectors/kafka/latency.py).
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

