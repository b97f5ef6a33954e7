"""KinesisSinkConnector as a plugin: Kafka -> Amazon Kinesis Data Streams, resuming from recorded Kafka offsets."""

from __future__ import annotations

from connectors.config.routing import is_routed
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_source_label
from connectors.framework.sink_plugin import KafkaSink
from connectors.kinesis_sink.config import KinesisSinkConfig
from connectors.plugin import Bridge, Systems


def _writer(systems: Systems, bridge: Bridge, kafka):
    from connectors.kinesis_sink.write import kinesis_writer

    return kinesis_writer(bridge.config, kafka)


SINK = KafkaSink(prepare=_writer, transforms_before_writer=True)


def _stream(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    streams = (sorted({cfg.stream_for(t) for t in cfg.topics_after_transforms(cfg.topic_list())})
               if is_routed(cfg.stream_name) else [cfg.stream_name])
    return tuple(Endpoint(("kinesis", cfg.region, stream), "kinesis", f"Kinesis stream {stream} ({cfg.region})")
                 for stream in streams)


CONNECTOR = SINK.plugin(
    name="KinesisSinkConnector",
    java_class="bridge.kinesis.KinesisSinkConnector",
    config_model=KinesisSinkConfig,
    writes_to=("kinesis",),
    uses=(),
    route=lambda bridge: (f"Kafka {kafka_source_label(bridge.config)} -> Kinesis stream "
                          f"{bridge.config.stream_name} ({bridge.config.region})"),
    writes=_stream,
    example={"name": "orders_to_kinesis", "topics": "orders", "kinesis.stream.name": "orders",
             "kinesis.region": "us-east-1"},
)
