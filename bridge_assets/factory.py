"""One software-defined asset per bridge."""

import contextlib
from typing import TYPE_CHECKING, Iterator

from dagster import AssetExecutionContext, AssetsDefinition, Failure, MaterializeResult, MetadataValue, asset

from connectors.errors import BatchError
from jobs.lease import BridgeBusy, BridgeLease

from sensors.recorded_offsets import (
    kafka_offsets_metadata, lite_cursors_metadata, recorded_kafka_offsets, recorded_lite_cursors,
)
from connectors.config.bridges_file import Bridge
from resources.lease import BridgeLeaseResource
from resources.connectors import CloudPubSubSourceResource, PubSubLiteSourceResource, S3BlockGzipSinkResource

if TYPE_CHECKING:  # Spark and Arrow are imported by runs, not by the code location's load
    from connectors.kafka.sink_batch import SinkBatchResult


def build_bridge_asset(bridge: Bridge) -> AssetsDefinition:
    builders = {"CloudPubSubSinkConnector": lambda b: _kafka_sink_asset(b, "cloud_pubsub_sink"),
                "CloudPubSubSourceConnector": _cloud_pubsub_source_asset,
                "PubSubLiteSinkConnector": lambda b: _kafka_sink_asset(b, "pubsublite_sink"),
                "PubSubLiteSourceConnector": _pubsublite_source_asset,
                "S3BlockGzipSinkConnector": _s3_block_gzip_sink_asset}
    return builders[bridge.connector](bridge)


def _describe(bridge: Bridge) -> str:
    cfg = bridge.config
    if bridge.connector == "CloudPubSubSourceConnector":
        route = f"Pub/Sub projects/{cfg.cps_project}/subscriptions/{cfg.cps_subscription} -> Kafka {cfg.kafka_topic}"
    elif bridge.connector == "PubSubLiteSourceConnector":
        route = f"Pub/Sub Lite {cfg.subscription_path()} -> Kafka {cfg.kafka_topic}"
    elif bridge.connector == "S3BlockGzipSinkConnector":
        route = f"Kafka {cfg.topics or f'/{cfg.topics_regex}/'} -> s3://{cfg.s3_bucket}/{cfg.key_prefix()} (Block-GZIP)"
    elif bridge.connector == "PubSubLiteSinkConnector":
        route = (f"Kafka {cfg.topics or f'/{cfg.topics_regex}/'} -> Pub/Sub Lite {cfg.topic_path()} "
                 f"(ordering {cfg.pubsublite_ordering_mode})")
    else:
        source = cfg.topics or f"/{cfg.topics_regex}/"
        route = f"Kafka {source} -> Pub/Sub projects/{cfg.cps_project}/topics/{cfg.cps_topic}"
    return f"{bridge.connector}: {route}. One run moves one micro-batch."


def _asset_properties(bridge: Bridge) -> dict:
    """What every bridge asset shows: key = bridge name, group = connector kind, kinds tags."""
    return {
        "name": bridge.name,
        "group_name": bridge.connector,
        "kinds": set(bridge.kind.kinds),
        "description": _describe(bridge),
        "tags": {"connector": bridge.connector},
        "op_tags": {"bridge": bridge.name},
    }


@contextlib.contextmanager
def _holding_lease(context: AssetExecutionContext, bridge: Bridge) -> Iterator[BridgeLease]:
    """The bridge's lease for the whole body: position read, batch moved, lease checked, result recorded."""
    try:
        timing = context.resources.bridge_lease.timing()
        lease = BridgeLease.acquire(context.instance, bridge.name, context.run_id, timing)
    except BridgeBusy as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    if lease.fenced:
        context.log.warning(f"Fenced run {lease.fenced.run_id} of bridge {bridge.name}: {lease.fenced.stale_because}")
    try:
        yield lease
    except BatchError as exc:  # one line naming what and where, not a JVM trace
        raise Failure(description=str(exc)) from None
    finally:
        lease.release()


def _kafka_sink_asset(bridge: Bridge, resource_key: str) -> AssetsDefinition:
    """Kafka -> somewhere, resumed from the Kafka offsets this asset recorded last."""

    @asset(**_asset_properties(bridge), required_resource_keys={resource_key, "bridge_lease"})
    def _bridge(context: AssetExecutionContext) -> MaterializeResult:
        with _holding_lease(context, bridge) as lease:
            recorded = recorded_kafka_offsets(context.instance, context.asset_key)
            result = getattr(context.resources, resource_key).run_batch(bridge, recorded)
            lease.check()
        context.log.info(
            f"{result.totals['records']} records read, {result.totals['published']} published in "
            f"{result.duration_s:.1f}s; {result.plan.lag_after()} left for the next run"
        )
        if result.totals["dead_letter_refused"]:
            context.log.warning(f"{result.totals['dead_letter_refused']} records were refused by the dead-letter "
                                "topic too and skipped (errors.tolerance=all): "
                                + "; ".join(result.dead_letter_refusals[:3]))
        if result.totals["headers_dropped"]:
            context.log.warning(f"{result.totals['headers_dropped']} headers could not become attributes (over the "
                                "attribute limits, binary, null or a repeated key) and were dropped")
        return MaterializeResult(metadata=sink_metadata(result))

    return _bridge


def _cloud_pubsub_source_asset(bridge: Bridge) -> AssetsDefinition:
    @asset(**_asset_properties(bridge))
    def _bridge(context: AssetExecutionContext, cloud_pubsub_source: CloudPubSubSourceResource,
                bridge_lease: BridgeLeaseResource) -> MaterializeResult:
        # Pub/Sub keeps the cursor (acked or not), so there is nothing of ours to resume from.
        with _holding_lease(context, bridge) as lease:
            result = cloud_pubsub_source.run_batch(bridge)
            lease.check()
        context.log.info(f"{result.pulled} messages pulled, {result.written} written, {result.acked} acked "
                         f"in {result.duration_s:.1f}s")
        return MaterializeResult(metadata={
            "messages_pulled": MetadataValue.int(result.pulled),
            "records_written": MetadataValue.int(result.written),
            "messages_acked": MetadataValue.int(result.acked),
            "messages_dropped": MetadataValue.int(result.dropped),
            "bytes_written": MetadataValue.int(result.bytes),
            "duration_seconds": MetadataValue.float(round(result.duration_s, 3)),
            "records_per_second": MetadataValue.float(round(result.records_per_second, 1)),
            "records_per_kafka_partition": MetadataValue.json(result.per_partition),
        })

    return _bridge


def _pubsublite_source_asset(bridge: Bridge) -> AssetsDefinition:
    @asset(**_asset_properties(bridge))
    def _bridge(context: AssetExecutionContext, pubsublite_source: PubSubLiteSourceResource,
                bridge_lease: BridgeLeaseResource) -> MaterializeResult:
        with _holding_lease(context, bridge) as lease:
            recorded = recorded_lite_cursors(context.instance, context.asset_key)
            result = pubsublite_source.run_batch(bridge, recorded)
            lease.check()
        context.log.info(f"{result.messages - result.dropped} messages moved to Kafka in {result.duration_s:.1f}s; "
                         f"{result.backlog_after} left for the next run")
        if result.dropped:
            context.log.warning(f"{result.dropped} messages were refused by Kafka for good and skipped "
                                "(errors.tolerance=all); the task's log names them")
        metadata = {
            "lite_cursors": lite_cursors_metadata({**result.start_cursors, **result.next_cursors}),
            "messages_written": MetadataValue.int(result.messages - result.dropped),
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
        return MaterializeResult(metadata=metadata)

    return _bridge


def _s3_block_gzip_sink_asset(bridge: Bridge) -> AssetsDefinition:
    @asset(**_asset_properties(bridge))
    def _bridge(context: AssetExecutionContext, s3_block_gzip_sink: S3BlockGzipSinkResource,
                bridge_lease: BridgeLeaseResource) -> MaterializeResult:
        # Resumes from the cursor objects in S3; the offsets recorded here are for the UI and the sensor.
        with _holding_lease(context, bridge) as lease:
            result = s3_block_gzip_sink.run_batch(bridge)
            lease.check()
        t = result.totals
        context.log.info(f"{t['records'] - t['skipped']} records archived in {t['files']} files in "
                         f"{result.duration_s:.1f}s")
        if t["skipped"]:
            context.log.warning(f"{t['skipped']} records could not become lines and were skipped "
                                "(errors.tolerance=all; dead-lettered if a dead-letter topic is set)")
        return MaterializeResult(metadata={
            "kafka_offsets": kafka_offsets_metadata(result.plan.next_offsets),
            "records_archived": MetadataValue.int(t["records"] - t["skipped"]),
            "records_skipped": MetadataValue.int(t["skipped"]),
            "files_written": MetadataValue.int(t["files"]),
            "bytes_uncompressed": MetadataValue.int(t["bytes_uncompressed"]),
            "bytes_written": MetadataValue.int(t["bytes_written"]),
            "duration_seconds": MetadataValue.float(round(result.duration_s, 3)),
            "records_per_second": MetadataValue.float(
                round(t["records"] / result.duration_s, 1) if result.duration_s else 0.0),
            "lag_remaining": MetadataValue.int(result.plan.lag_after()),
            "partitions": MetadataValue.json(result.per_partition),
        })

    return _bridge


def sink_metadata(result: "SinkBatchResult") -> dict:
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
        "partitions": MetadataValue.json(result.per_partition),
    }
    if result.dead_letter_refusals:
        metadata["dead_letter_refusals"] = MetadataValue.json(result.dead_letter_refusals)
    if result.plan.skipped_by_retention:
        metadata["records_lost_to_retention"] = MetadataValue.json(result.plan.skipped_by_retention)
    return metadata
