"""What each connector is to the Dagster layer, declared in one place: the resource that runs it, the
position a run starts from, how one micro-batch moves and what it reports, and the cheap check that says
whether there is anything to move (the same question its sensor asks).

Every batch reports one shape, `BatchOutcome`, so one asset builder serves every connector in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from dagster import AssetKey, DagsterInstance, MetadataValue, TableColumn, TableRecord, TableSchema

from bridge_assets import lineage
from health import HealthSignals
from bridge_assets.lineage import Endpoint
from connectors.config.bridges_file import Bridge
from sensors.recorded_offsets import (
    kafka_offsets_metadata, lite_cursors_metadata, recorded_kafka_offsets, recorded_lite_cursors,
)

if TYPE_CHECKING:  # Spark and Arrow are imported by runs, not by the code location's load
    from connectors.kafka.sink_batch import SinkBatchResult


@dataclass(frozen=True)
class BatchOutcome:
    moved: int  # records (or messages) that reached the target
    position: Any  # where the next batch of the same run starts (Kafka offsets, Lite cursors, or None)
    metadata: dict[str, MetadataValue]  # what a one-batch run records, the position included
    counters: tuple[str, ...]  # names in `metadata` whose values add up over several batches
    line: str  # one line for the run's log
    warnings: tuple[str, ...] = ()
    duration_s: float = 0.0


@dataclass(frozen=True)
class BridgeRunner:
    resource_key: str
    # The position recorded by the bridge's latest materialization (None for connectors that keep none).
    recorded: Callable[[DagsterInstance, AssetKey], Any]
    # Move one micro-batch from `position` with the connector's resource.
    move: Callable[[Any, Bridge, Any], BatchOutcome]
    # Made once per continuous run: a cheap check, from a position, of whether there is anything to move.
    watcher: Callable[[Any, Bridge], Callable[[Any], bool]]
    route: Callable[[Bridge], str]
    # What the bridge reads and writes, for the lineage page; `systems` maps a resource key ("pubsub",
    # "pubsublite") to the initialized shared resource, to look up a subscription's topic.
    reads: Callable[[Bridge, dict[str, Any]], tuple[Endpoint, ...]]
    writes: Callable[[Bridge], tuple[Endpoint, ...]]
    health: HealthSignals  # where its metadata says how it is doing, for the asset checks


def _kafka_source(cfg) -> str:
    return cfg.topics or f"/{cfg.topics_regex}/"


def _kafka_topics_read(bridge: Bridge, systems: dict[str, Any]) -> tuple[Endpoint, ...]:
    # A topics.regex source matches topics that may not exist yet: it has no endpoint to draw.
    return tuple(lineage.kafka_topic(t) for t in bridge.config.topic_list())


def _kafka_topic_written(bridge: Bridge) -> tuple[Endpoint, ...]:
    return (lineage.kafka_topic(bridge.config.kafka_topic),)


def _partitions_table(plan, per_partition: dict[str, dict[str, int]], counters: tuple[str, ...]) -> MetadataValue:
    """Per topic-partition, readable at a glance: where the bridge is, how far behind, what this batch moved."""
    rows = []
    for topic in sorted(plan.end_offsets):
        for partition in sorted(plan.end_offsets[topic]):
            next_offset, counts = plan.next_offsets[topic][partition], per_partition.get(f"{topic}-{partition}", {})
            rows.append(TableRecord({"topic": topic, "partition": partition, "next_offset": next_offset,
                                     "lag": plan.end_offsets[topic][partition] - next_offset,
                                     **{name: counts.get(name, 0) for name in counters}}))
    columns = [TableColumn("topic", "string"), TableColumn("partition", "int"), TableColumn("next_offset", "int"),
               TableColumn("lag", "int"), *(TableColumn(name, "int") for name in counters)]
    return MetadataValue.table(rows, TableSchema(columns=columns))


def _rate(records: int, duration_s: float) -> MetadataValue:
    return MetadataValue.float(round(records / duration_s, 1) if duration_s > 0 else 0.0)


# --- Kafka sinks (Cloud Pub/Sub, Pub/Sub Lite): resume from the Kafka offsets recorded last ----------------

_SINK_HEALTH = HealthSignals("lag_remaining", "records",
                             ("records_dead_lettered", "records_dropped", "records_dead_letter_refused"))
_SINK_COUNTERS = ("records_read", "records_published", "records_skipped", "records_dead_lettered", "records_dropped",
                  "records_dead_letter_refused", "bytes_read", "headers_dropped")


def sink_outcome(result: "SinkBatchResult") -> BatchOutcome:
    t = result.totals
    metadata = {
        "kafka_offsets": kafka_offsets_metadata(result.next_offsets),
        "records_read": MetadataValue.int(t["records"]),
        "records_published": MetadataValue.int(t["published"]),
        "records_skipped": MetadataValue.int(t["skipped"]),
        "records_dead_lettered": MetadataValue.int(t["dead_lettered"]),
        "records_dropped": MetadataValue.int(t["failed_dropped"]),
        "records_dead_letter_refused": MetadataValue.int(t["dead_letter_refused"]),
        "bytes_read": MetadataValue.int(t["bytes"]),
        "headers_dropped": MetadataValue.int(t["headers_dropped"]),
        "duration_seconds": MetadataValue.float(round(result.duration_s, 3)),
        "records_per_second": MetadataValue.float(round(result.records_per_second, 1)),
        "lag_remaining": MetadataValue.int(result.plan.lag_after()),
        "partitions": _partitions_table(result.plan, result.per_partition, ("records", "published", "dead_lettered")),
    }
    if result.dead_letter_refusals:
        metadata["dead_letter_refusals"] = MetadataValue.json(result.dead_letter_refusals)
    if result.plan.skipped_by_retention:
        metadata["records_lost_to_retention"] = MetadataValue.json(result.plan.skipped_by_retention)
    warnings = []
    if t["dead_letter_refused"]:
        warnings.append(f"{t['dead_letter_refused']} records were refused by the dead-letter topic too and skipped "
                        "(errors.tolerance=all): " + "; ".join(result.dead_letter_refusals[:3]))
    if t["headers_dropped"]:
        warnings.append(f"{t['headers_dropped']} headers could not become attributes (over the attribute limits, "
                        "binary, null or a repeated key) and were dropped")
    line = (f"{t['records']} records read, {t['published']} published in {result.duration_s:.1f}s; "
            f"{result.plan.lag_after()} left for the next batch")
    return BatchOutcome(t["published"], result.next_offsets, metadata, _SINK_COUNTERS, line, tuple(warnings),
                        result.duration_s)


def _kafka_lag_watcher(resource, bridge: Bridge) -> Callable[[Any], bool]:
    """Anything past `position` in the bridge's topics (two admin calls, no consuming)."""
    admin = resource.kafka.admin()
    config = bridge.config

    def pending(position) -> bool:
        partitions = admin.partitions(config.topic_list() or None, config.topics_regex)
        plan = admin.plan_batch(partitions, position or {}, 1, bridge.batch.initial_offsets, bridge.consumer_group)
        return plan.total_records > 0

    return pending


def _cloud_sink_route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Kafka {_kafka_source(cfg)} -> Pub/Sub projects/{cfg.cps_project}/topics/{cfg.cps_topic}"


def _lite_sink_route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Kafka {_kafka_source(cfg)} -> Pub/Sub Lite {cfg.topic_path()} (ordering {cfg.pubsublite_ordering_mode})"


CLOUD_PUBSUB_SINK = BridgeRunner(
    "cloud_pubsub_sink", recorded_kafka_offsets,
    lambda resource, bridge, position: sink_outcome(resource.run_batch(bridge, position)),
    _kafka_lag_watcher, _cloud_sink_route, _kafka_topics_read,
    lambda bridge: (lineage.pubsub_topic(bridge.config.cps_project, bridge.config.cps_topic),), _SINK_HEALTH)

PUBSUBLITE_SINK = BridgeRunner(
    "pubsublite_sink", recorded_kafka_offsets,
    lambda resource, bridge, position: sink_outcome(resource.run_batch(bridge, position)),
    _kafka_lag_watcher, _lite_sink_route, _kafka_topics_read,
    lambda bridge: (lineage.lite_topic(str(bridge.config.topic_path())),), _SINK_HEALTH)


# --- Cloud Pub/Sub source: Pub/Sub keeps the cursor (acked or not), so there is no position of ours ---------

def _cloud_source_move(resource, bridge: Bridge, position) -> BatchOutcome:
    result = resource.run_batch(bridge)
    metadata = {
        "messages_pulled": MetadataValue.int(result.pulled),
        "records_written": MetadataValue.int(result.written),
        "messages_acked": MetadataValue.int(result.acked),
        "messages_dropped": MetadataValue.int(result.dropped),
        "bytes_written": MetadataValue.int(result.bytes),
        "duration_seconds": MetadataValue.float(round(result.duration_s, 3)),
        "records_per_second": MetadataValue.float(round(result.records_per_second, 1)),
        "records_per_kafka_partition": MetadataValue.json(result.per_partition),
    }
    line = f"{result.pulled} messages pulled, {result.written} written, {result.acked} acked in {result.duration_s:.1f}s"
    return BatchOutcome(result.written, None, metadata,
                        ("messages_pulled", "records_written", "messages_acked", "messages_dropped", "bytes_written"),
                        line, (), result.duration_s)


def _cloud_source_watcher(resource, bridge: Bridge) -> Callable[[Any], bool]:
    from connectors.cloud_pubsub_source.peek import SubscriptionPeek

    peek = SubscriptionPeek(resource.pubsub.connection_for(bridge.config), bridge.config)
    return lambda position: peek.has_messages()


def _cloud_source_route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Pub/Sub projects/{cfg.cps_project}/subscriptions/{cfg.cps_subscription} -> Kafka {cfg.kafka_topic}"


def _cloud_source_reads(bridge: Bridge, systems: dict[str, Any]) -> tuple[Endpoint, ...]:
    from connectors.cloud_pubsub_source.peek import subscription_topic

    cfg = bridge.config
    connection = systems["pubsub"].connection_for(cfg)
    return (lineage.pubsub_subscription(cfg.cps_project, cfg.cps_subscription,
                                        lambda: subscription_topic(connection, cfg)),)


CLOUD_PUBSUB_SOURCE = BridgeRunner("cloud_pubsub_source", lambda instance, key: None, _cloud_source_move,
                                   _cloud_source_watcher, _cloud_source_route, _cloud_source_reads,
                                   _kafka_topic_written, HealthSignals(None, "messages", ("messages_dropped",)))


# --- Pub/Sub Lite source: resume from the Lite cursors recorded last --------------------------------------

def _lite_source_move(resource, bridge: Bridge, position) -> BatchOutcome:
    result = resource.run_batch(bridge, position)
    written = result.messages - result.dropped
    cursors = {**result.start_cursors, **result.next_cursors}
    metadata = {
        "lite_cursors": lite_cursors_metadata(cursors),
        "messages_written": MetadataValue.int(written),
        "messages_dropped": MetadataValue.int(result.dropped),
        "bytes_written": MetadataValue.int(result.bytes),
        "duration_seconds": MetadataValue.float(round(result.duration_s, 3)),
        "records_per_second": MetadataValue.float(round(result.records_per_second, 1)),
        "backlog_remaining": MetadataValue.int(result.backlog_after),
        "head_cursors": lite_cursors_metadata(result.head_cursors),
    }
    if result.lost_to_retention:
        metadata["messages_lost_to_retention"] = MetadataValue.json(
            {str(p): n for p, n in result.lost_to_retention.items()})
    warnings = ()
    if result.dropped:
        warnings = (f"{result.dropped} messages were refused by Kafka for good and skipped (errors.tolerance=all); "
                    "the task's log names them",)
    line = f"{written} messages moved to Kafka in {result.duration_s:.1f}s; {result.backlog_after} left for the next batch"
    return BatchOutcome(written, cursors, metadata, ("messages_written", "messages_dropped", "bytes_written"), line,
                        warnings, result.duration_s)


def _lite_backlog_watcher(resource, bridge: Bridge) -> Callable[[Any], bool]:
    from connectors.pubsublite_source.batch import LiteBacklogWatch

    watch = LiteBacklogWatch(resource.pubsublite.connection_for(bridge.config), bridge.config)
    return lambda position: watch.pending(position or {})


def _lite_source_route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Pub/Sub Lite {cfg.subscription_path()} -> Kafka {cfg.kafka_topic}"


def _lite_source_reads(bridge: Bridge, systems: dict[str, Any]) -> tuple[Endpoint, ...]:
    from connectors.pubsublite_source.batch import subscription_topic

    cfg = bridge.config
    connection = systems["pubsublite"].connection_for(cfg)
    return (lineage.lite_subscription(str(cfg.subscription_path()), lambda: subscription_topic(connection, cfg)),)


PUBSUBLITE_SOURCE = BridgeRunner("pubsublite_source", recorded_lite_cursors, _lite_source_move,
                                 _lite_backlog_watcher, _lite_source_route, _lite_source_reads, _kafka_topic_written,
                                 HealthSignals("backlog_remaining", "messages", ("messages_dropped",)))


# --- S3 archive: resumes from its cursor objects in S3 (the offsets recorded here where a partition has none) -

def _archive_move(resource, bridge: Bridge, position) -> BatchOutcome:
    result = resource.run_batch(bridge, position)
    t = result.totals
    archived = t["records"] - t["skipped"]
    metadata = {
        "kafka_offsets": kafka_offsets_metadata(result.plan.next_offsets),
        "records_archived": MetadataValue.int(archived),
        "records_skipped": MetadataValue.int(t["skipped"]),
        "files_written": MetadataValue.int(t["files"]),
        "bytes_uncompressed": MetadataValue.int(t["bytes_uncompressed"]),
        "bytes_written": MetadataValue.int(t["bytes_written"]),
        "duration_seconds": MetadataValue.float(round(result.duration_s, 3)),
        "records_per_second": _rate(t["records"], result.duration_s),
        "lag_remaining": MetadataValue.int(result.plan.lag_after()),
        "partitions": _partitions_table(result.plan, result.per_partition, ("records", "files", "skipped")),
    }
    warnings = ()
    if t["skipped"]:
        warnings = (f"{t['skipped']} records could not become lines and were skipped (errors.tolerance=all; "
                    "dead-lettered if a dead-letter topic is set)",)
    line = f"{archived} records archived in {t['files']} files in {result.duration_s:.1f}s"
    return BatchOutcome(archived, result.plan.next_offsets, metadata,
                        ("records_archived", "records_skipped", "files_written", "bytes_uncompressed", "bytes_written"),
                        line, warnings, result.duration_s)


def _archive_route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Kafka {_kafka_source(cfg)} -> s3://{cfg.s3_bucket}/{cfg.key_prefix()} (Block-GZIP)"


S3_BLOCK_GZIP_SINK = BridgeRunner(
    "s3_block_gzip_sink", recorded_kafka_offsets, _archive_move, _kafka_lag_watcher, _archive_route,
    _kafka_topics_read, lambda bridge: (lineage.s3_prefix(bridge.config.s3_bucket, bridge.config.key_prefix()),),
    HealthSignals("lag_remaining", "records", ("records_skipped",)))


RUNNERS = {
    "CloudPubSubSinkConnector": CLOUD_PUBSUB_SINK,
    "CloudPubSubSourceConnector": CLOUD_PUBSUB_SOURCE,
    "PubSubLiteSinkConnector": PUBSUBLITE_SINK,
    "PubSubLiteSourceConnector": PUBSUBLITE_SOURCE,
    "S3BlockGzipSinkConnector": S3_BLOCK_GZIP_SINK,
}


def runner_for(bridge: Bridge) -> BridgeRunner:
    return RUNNERS[bridge.connector]
