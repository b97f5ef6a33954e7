"""PulsarSinkConnector as a plugin: Kafka -> Apache Pulsar, resuming from recorded Kafka offsets."""

from __future__ import annotations

from connectors.bridge import Bridge
from connectors.config.routing import is_routed
from connectors.endpoints import Endpoint
from connectors.kafka.plugin_parts import (
    KAFKA_LAG, KAFKA_OFFSETS, SINK_KEYS, kafka_source_label, kafka_topics_read, sink_report,
)
from connectors.plugin import BatchReport, ConnectorPlugin, Systems
from connectors.pulsar_sink.config import PulsarSinkConfig


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.pulsar_sink.batch import run_pulsar_sink_batch

    with systems.spark.batch_session(bridge.name) as spark:
        return sink_report(run_pulsar_sink_batch(spark, bridge.name, bridge.config, systems.kafka.admin(), position,
                                                 bridge.batch, bridge.consumer_group))


def _writes(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    topics = sorted({cfg.topic_for(t) for t in cfg.topic_list()}) if is_routed(cfg.topic) else [cfg.topic]
    # persistent://tenant/namespace/topic -> pulsar/tenant/namespace/topic
    return tuple(Endpoint(("pulsar", *topic.split("://", 1)[-1].split("/")), "pulsar", f"Pulsar topic {topic}")
                 for topic in topics)


CONNECTOR = ConnectorPlugin(
    name="PulsarSinkConnector",
    java_class="bridge.pulsar.PulsarSinkConnector",
    config_model=PulsarSinkConfig,
    kinds=("kafka", "pulsar", "spark"),
    systems=("kafka", "spark"),
    route=lambda bridge: f"Kafka {kafka_source_label(bridge.config)} -> Pulsar {bridge.config.topic}",
    run_batch=_run_batch,
    position=KAFKA_OFFSETS,
    signal=KAFKA_LAG,
    reads=kafka_topics_read,
    writes=_writes,
    keys=SINK_KEYS,
)
