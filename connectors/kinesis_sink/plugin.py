"""KinesisSinkConnector as a plugin: Kafka -> Amazon Kinesis Data Streams, resuming from recorded Kafka offsets."""

from __future__ import annotations

from connectors.bridge import Bridge
from connectors.config.routing import is_routed
from connectors.endpoints import Endpoint
from connectors.kafka.plugin_parts import (
    KAFKA_LAG, KAFKA_OFFSETS, SINK_KEYS, kafka_source_label, kafka_topics_read, sink_report,
)
from connectors.kinesis_sink.config import KinesisSinkConfig
from connectors.plugin import BatchReport, ConnectorPlugin, Systems


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.kinesis_sink.batch import run_kinesis_sink_batch

    with systems.spark.batch_session(bridge.name) as spark:
        return sink_report(run_kinesis_sink_batch(spark, bridge.name, bridge.config, systems.kafka.admin(), position,
                                                  bridge.batch, bridge.consumer_group))


def _open_stream(systems: Systems, bridge: Bridge, position):
    from connectors.kafka.sink_stream import open_kafka_sink_stream
    from connectors.kinesis_sink.batch import deliver_to_kinesis

    return open_kafka_sink_stream(systems, bridge, position,
                                  deliver_to_kinesis(bridge.name, bridge.config, systems.kafka.admin()))


def _stream(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    streams = sorted({cfg.stream_for(t) for t in cfg.topic_list()}) if is_routed(cfg.stream_name) else [cfg.stream_name]
    return tuple(Endpoint(("kinesis", cfg.region, stream), "kinesis", f"Kinesis stream {stream} ({cfg.region})")
                 for stream in streams)


CONNECTOR = ConnectorPlugin(
    name="KinesisSinkConnector",
    java_class="bridge.kinesis.KinesisSinkConnector",
    config_model=KinesisSinkConfig,
    kinds=("kafka", "kinesis", "spark"),
    systems=("kafka", "spark"),
    route=lambda bridge: (f"Kafka {kafka_source_label(bridge.config)} -> Kinesis stream "
                          f"{bridge.config.stream_name} ({bridge.config.region})"),
    run_batch=_run_batch,
    position=KAFKA_OFFSETS,
    signal=KAFKA_LAG,
    reads=kafka_topics_read,
    writes=_stream,
    keys=SINK_KEYS,
    open_stream=_open_stream,
)
