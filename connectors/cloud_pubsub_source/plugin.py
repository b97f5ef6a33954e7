"""CloudPubSubSourceConnector as a plugin: Cloud Pub/Sub -> Kafka. Pub/Sub keeps the cursor (acked or not), so
there is no position of ours, and the backlog is not visible without pulling: its sensor starts a run every
interval (batch mode); continuous mode is an always-on stream of pull tasks (stream.py)."""

from __future__ import annotations

from connectors import endpoints
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.report import source_report
from connectors.cloud_pubsub_source.seek import CLOUD_SUBSCRIPTION_SEEK
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_topic_written
from connectors.plugin import BatchReport, Bridge, ConnectorPlugin, ReportKeys, Systems


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.cloud_pubsub_source.batch import run_source_batch

    config = bridge.config
    with systems.spark.batch_session(bridge.name) as spark:
        result = run_source_batch(spark, config, systems.pubsub.connection_for(config), systems.kafka.admin(),
                                  bridge.batch, bridge.name, bridge.consumer_group)
    return source_report(result)


def _open_stream(systems: Systems, bridge: Bridge, position):
    from connectors.cloud_pubsub_source.stream import CloudPubSubSourceStream

    config = bridge.config
    with systems.spark.batch_session(bridge.name) as spark:
        return CloudPubSubSourceStream(spark, systems.pubsub.connection_for(config), systems.kafka.admin(), bridge)


def _route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Pub/Sub projects/{cfg.cps_project}/subscriptions/{cfg.cps_subscription} -> Kafka {cfg.kafka_topic}"


def _reads(bridge: Bridge, systems: Systems) -> tuple[Endpoint, ...]:
    from connectors.cloud_pubsub_source.subscription import subscription_topic

    cfg = bridge.config
    connection = systems.pubsub.connection_for(cfg)
    return (endpoints.pubsub_subscription(cfg.cps_project, cfg.cps_subscription,
                                          lambda: subscription_topic(connection, cfg)),)


CONNECTOR = ConnectorPlugin(
    name="CloudPubSubSourceConnector",
    java_class="com.google.pubsub.kafka.source.CloudPubSubSourceConnector",
    config_model=CloudPubSubSourceConfig,
    kinds=("pubsub", "kafka", "spark"),
    systems=("kafka", "pubsub", "spark"),
    route=_route,
    run_batch=_run_batch,
    open_stream=_open_stream,
    position=None,
    signal=None,
    reads=_reads,
    writes=kafka_topic_written,
    exactly_once_modes=("batch", "continuous"),
    seek=CLOUD_SUBSCRIPTION_SEEK,
    keys=ReportKeys("messages", read="messages_pulled", delivered="records_written", lag=None,
                    rejected=("messages_dropped",),
                    counted=(("records_dropped", "messages_dropped"), ("bytes_written", "bytes_written"))),
    example={"name": "pubsub_to_orders", "cps.project": "my-project", "cps.subscription": "orders-sub",
             "kafka.topic": "orders"},
)
