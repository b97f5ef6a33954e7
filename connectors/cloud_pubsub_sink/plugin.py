"""CloudPubSubSinkConnector as a plugin: Kafka -> Cloud Pub/Sub, resuming from recorded Kafka offsets."""

from __future__ import annotations

from connectors import endpoints
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.config.routing import is_routed
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_source_label
from connectors.framework.sink_plugin import KafkaSink
from connectors.plugin import Bridge, Systems


def _writer(systems: Systems, bridge: Bridge, kafka):
    from connectors.cloud_pubsub_sink.write import pubsub_writer

    config = bridge.config
    return pubsub_writer(config, systems.pubsub.connection_for(config), bridge.batch.outage_timeout_seconds)


# A round of records waits at most maxDelayThresholdMs for more, as the Java connector's publisher does.
SINK = KafkaSink(prepare=_writer, linger_s=lambda config: config.delay_ms / 1000)


def _partition_order(config: CloudPubSubSinkConfig) -> str | None:
    """Pub/Sub keeps no order without ordering keys; with them, a key's messages must be published in order."""
    if config.ordering_key_source == "none":
        return None
    return f"orderingKeySource={config.ordering_key_source} publishes each ordering key's messages in order"


def _route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Kafka {kafka_source_label(cfg)} -> Pub/Sub projects/{cfg.cps_project}/topics/{cfg.cps_topic}"


def _writes(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    if not is_routed(cfg.cps_topic):
        return (endpoints.pubsub_topic(cfg.cps_project, cfg.cps_topic),)
    # Routed from a topics.regex: the topics are not known until they exist, so none is drawn. Through the routers
    # where a source topic's name alone decides where its records go (none is drawn otherwise).
    topics = cfg.topic_list()
    if cfg.transforms and cfg.transforms.renames_topics:
        topics = sorted({t for t in map(cfg.transforms.topic_after, topics) if t is not None})
    return tuple(endpoints.pubsub_topic(cfg.cps_project, cfg.routed(cfg.cps_topic, t)) for t in topics)


CONNECTOR = SINK.plugin(
    name="CloudPubSubSinkConnector",
    java_class="com.google.pubsub.kafka.sink.CloudPubSubSinkConnector",
    config_model=CloudPubSubSinkConfig,
    writes_to=("pubsub",),
    uses=("pubsub",),
    route=_route,
    writes=_writes,
    partition_order=_partition_order,
    example={"name": "orders_to_pubsub", "topics": "orders", "cps.project": "my-project", "cps.topic": "orders"},
)
