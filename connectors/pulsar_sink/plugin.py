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


def _open_stream(systems: Systems, bridge: Bridge, position):
    from connectors.kafka.sink_stream import open_kafka_sink_stream
    from connectors.pulsar_sink.batch import deliver_to_pulsar

    config = bridge.config
    # A round waits for more records as long as the producer batches them (pulsar.batching.max.publish.delay.ms).
    linger_s = config.batching_max_publish_delay_ms / 1000 if config.batching_enabled else 0.0
    return open_kafka_sink_stream(systems, bridge, position,
                                  deliver_to_pulsar(bridge.name, config, systems.kafka.admin()), linger_s)


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
    open_stream=_open_stream,
)
