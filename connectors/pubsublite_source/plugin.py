"""PubSubLiteSourceConnector as a plugin: Pub/Sub Lite -> Kafka, resuming from recorded Lite cursors; its
signal is the head cursors against them (cheap unary calls); continuous mode is an always-on stream (stream.py)."""

from __future__ import annotations

from connectors import endpoints
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_topic_written
from connectors.plugin import (
    BatchReport, Bridge, ConnectorPlugin, Position, ReportKeys, Signal, SourcePlaces, Systems, Waiting,
)
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.pubsublite_source.places import lite_mirror, lite_moved, lite_offsets_at, lite_places
from connectors.pubsublite_source.report import cursors_to_json, lite_source_report


# Next Lite offset to read per partition.
LITE_CURSORS = Position("lite_cursors", cursors_to_json,
                        lambda value: {int(p): int(o) for p, o in (value or {}).items()},
                        source=SourcePlaces(places=lite_places, moved=lite_moved, offsets_at=lite_offsets_at,
                                            mirror=lite_mirror, moves_transactions=True))


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.pubsublite_source.batch import run_lite_source_batch

    config = bridge.config
    with systems.spark.batch_session(bridge.name) as spark:
        result = run_lite_source_batch(spark, config, systems.pubsublite.connection_for(config),
                                       systems.kafka.admin(), position, bridge.batch, bridge.name,
                                       bridge.consumer_group)
    return lite_source_report(result)


def _open_stream(systems: Systems, bridge: Bridge, position):
    from connectors.pubsublite_source.stream import LiteSourceStream

    config = bridge.config
    with systems.spark.batch_session(bridge.name) as spark:
        return LiteSourceStream(spark, systems.pubsublite.connection_for(config), systems.kafka.admin(), bridge,
                                position or {})


def _backlog(systems: Systems, bridge: Bridge, position) -> Waiting:
    from connectors.pubsublite_source.batch import lite_positions

    starts, heads = lite_positions(systems.pubsublite.connection_for(bridge.config), bridge.config, position or {})
    return Waiting(sum(max(0, heads[p] - starts[p]) for p in heads), heads)


def _route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Pub/Sub Lite {cfg.subscription_path()} -> Kafka {cfg.kafka_topic}"


def _reads(bridge: Bridge, systems: Systems) -> tuple[Endpoint, ...]:
    from connectors.pubsublite_source.batch import subscription_topic

    cfg = bridge.config
    connection = systems.pubsublite.connection_for(cfg)
    return (endpoints.lite_subscription(str(cfg.subscription_path()), lambda: subscription_topic(connection, cfg)),)


CONNECTOR = ConnectorPlugin(
    name="PubSubLiteSourceConnector",
    java_class="com.google.pubsublite.kafka.source.PubSubLiteSourceConnector",
    config_model=PubSubLiteSourceConfig,
    kinds=("pubsub", "kafka", "spark"),
    systems=("kafka", "pubsublite", "spark"),
    route=_route,
    run_batch=_run_batch,
    open_stream=_open_stream,
    position=LITE_CURSORS,
    signal=Signal("backlog", ("pubsublite",), _backlog),
    reads=_reads,
    writes=kafka_topic_written,
    keys=ReportKeys("messages", read="messages_read", delivered="messages_written", lag="backlog_remaining",
                    rejected=("messages_dropped",),
                    counted=(("records_dropped", "messages_dropped"), ("bytes_written", "bytes_written"))),
    exactly_once_modes=("batch", "continuous"),
    example={"name": "lite_to_orders", "pubsublite.project": "my-project", "pubsublite.location": "us-central1-a",
             "pubsublite.subscription": "orders-sub", "kafka.topic": "orders"},
)
