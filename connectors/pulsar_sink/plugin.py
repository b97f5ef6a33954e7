"""PulsarSinkConnector as a plugin: Kafka -> Apache Pulsar, resuming from recorded Kafka offsets."""

from __future__ import annotations

import functools

from connectors.config.routing import is_routed
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_source_label
from connectors.framework.sink_plugin import KafkaSink
from connectors.plugin import Bridge, Systems
from connectors.pulsar_sink.config import PulsarSinkConfig


def _writer(systems: Systems, bridge: Bridge, kafka):
    from connectors.pulsar_sink.write import PulsarWriter

    return functools.partial(PulsarWriter, bridge.config)


def _linger_s(config: PulsarSinkConfig) -> float:
    # A round waits for more records as long as the producer batches them (pulsar.batching.max.publish.delay.ms).
    return config.batching_max_publish_delay_ms / 1000 if config.batching_enabled else 0.0


SINK = KafkaSink(prepare=_writer, linger_s=_linger_s, transforms_before_writer=True)


def _writes(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    topics = (sorted({cfg.topic_for(t) for t in cfg.topics_after_transforms(cfg.topic_list())})
              if is_routed(cfg.topic) else [cfg.topic])
    # persistent://tenant/namespace/topic -> pulsar/tenant/namespace/topic
    return tuple(Endpoint(("pulsar", *topic.split("://", 1)[-1].split("/")), "pulsar", f"Pulsar topic {topic}")
                 for topic in topics)


CONNECTOR = SINK.plugin(
    name="PulsarSinkConnector",
    java_class="bridge.pulsar.PulsarSinkConnector",
    config_model=PulsarSinkConfig,
    writes_to=("pulsar",),
    uses=(),
    route=lambda bridge: f"Kafka {kafka_source_label(bridge.config)} -> Pulsar {bridge.config.topic}",
    writes=_writes,
    example={"name": "orders_to_pulsar", "topics": "orders", "pulsar.service.url": "pulsar://pulsar:6650"},
)
