"""PubSubLiteSinkConnector as a plugin: Kafka -> Pub/Sub Lite, resuming from recorded Kafka offsets."""

from __future__ import annotations

from connectors import endpoints
from connectors.config.routing import is_routed
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_source_label
from connectors.framework.sink_plugin import KafkaSink
from connectors.plugin import Bridge, Systems
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig


# How long a round waits for more records: the Lite client library's publish batching delay (50 ms).
LITE_LINGER_S = 0.05


def _writer(systems: Systems, bridge: Bridge, kafka):
    from connectors.pubsublite_sink.write import lite_writer

    config = bridge.config
    return lite_writer(config, systems.pubsublite.connection_for(config), kafka, bridge.batch.outage_timeout_seconds)


SINK = KafkaSink(prepare=_writer, linger_s=lambda config: LITE_LINGER_S)


def _route(bridge: Bridge) -> str:
    cfg = bridge.config
    return (f"Kafka {kafka_source_label(cfg)} -> Pub/Sub Lite {cfg.topic_path()} "
            f"(ordering {cfg.pubsublite_ordering_mode})")


def _writes(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    if not is_routed(cfg.pubsublite_topic):
        return (endpoints.lite_topic(str(cfg.topic_path())),)
    # Each source topic's Lite topic, through the routers where its name alone decides (none is drawn otherwise).
    return tuple(endpoints.lite_topic(str(cfg.topic_path(t))) for t in cfg.topics_after_transforms(cfg.topic_list()))


CONNECTOR = SINK.plugin(
    name="PubSubLiteSinkConnector",
    java_class="com.google.pubsublite.kafka.sink.PubSubLiteSinkConnector",
    config_model=PubSubLiteSinkConfig,
    writes_to=("pubsub",),
    uses=("pubsublite",),
    route=_route,
    writes=_writes,
    example={"name": "orders_to_lite", "topics": "orders", "pubsublite.project": "my-project",
             "pubsublite.location": "us-central1-a", "pubsublite.topic": "orders"},
)
