"""The shared driver of the Kafka-reading sinks, as a sink's plugin declares it (`KafkaSink`): how to prepare its
writer on the driver, and how long an always-on round lingers; the sink gets its batches (sink_batch.py) and its
always-on stream (sink_stream.py), both running its writer through the task body of sink_writer.py."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from connectors.config.common import ConnectorConfig, ErrorHandlingKeys
from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import KAFKA_LAG, KAFKA_OFFSETS, SINK_KEYS, kafka_topics_read, sink_report
from connectors.plugin import BatchReport, Bridge, ConnectorPlugin, Systems

if TYPE_CHECKING:  # Spark, Arrow and the Kafka clients are imported by runs, not by the code location's load
    from connectors.kafka.admin import KafkaAdmin, Offsets
    from connectors.framework.delivered import Landings
    from connectors.framework.sink_writer import OpenWriter
    from connectors.framework.spark_read import Deliver


# How long an always-on round waits for more records after its first, for a sink whose client has no linger of its own.
DEFAULT_LINGER_S = 0.05


@dataclass(frozen=True)
class KafkaSink:
    """A Kafka-reading sink, as its plugin declares it to the shared driver: `prepare` runs on the driver before each
    batch, at a stream's open and when its partitions change (checks, lookups: Kafka Connect's SinkConnector.start)
    and returns how a task opens its writer (sink_writer.SinkWriter); `linger_s` is how long an always-on round waits
    for more records, after the sink's own client's batching delay; `landings`, for a sink writing to Kafka, what its
    stream does with where records landed. Its `run_batch` and `open_stream` are the plugin's."""

    prepare: Callable[[Systems, Bridge, KafkaAdmin], OpenWriter]
    linger_s: Callable[[ConnectorConfig], float] = lambda config: DEFAULT_LINGER_S
    # A sink whose writer reports where records landed (SinkTally.landed): its stream's Landings, made at its open.
    landings: Callable[[Systems, Bridge, KafkaAdmin], Landings | None] | None = None
    # A sink without converters (its writer sends Kafka's bytes): the shared task body runs its transforms (the
    # columnar ones its config takes) before its writer. A sink with converters runs them in its writer, after them.
    transforms_before_writer: bool = False

    def plugin(self, *, name: str, java_class: str, config_model: type[ConnectorConfig], writes_to: tuple[str, ...],
               uses: tuple[str, ...], route: Callable[[Bridge], str], writes: Callable[[Bridge], tuple[Endpoint, ...]],
               **declared: Any) -> ConnectorPlugin:
        """The sink's plugin, with what every Kafka-reading sink declares alike filled in: it reads Kafka topics
        through Spark (kind tags `kafka`, then `writes_to`, then `spark`; shared systems `kafka`, `uses`, `spark`),
        its batches and stream are this driver's, its position the Kafka offsets it recorded, its signal the lag,
        its report the sinks' keys. `declared` adds or replaces ConnectorPlugin fields (the Kafka sink's own batch
        and position)."""
        return ConnectorPlugin(**{
            "name": name, "java_class": java_class, "config_model": config_model,
            "kinds": ("kafka", *writes_to, "spark"), "systems": ("kafka", *uses, "spark"), "route": route,
            "run_batch": self.run_batch, "open_stream": self.open_stream, "position": KAFKA_OFFSETS,
            "signal": KAFKA_LAG, "reads": kafka_topics_read, "writes": writes, "keys": SINK_KEYS, **declared})

    def deliver(self, systems: Systems, bridge: Bridge, kafka: KafkaAdmin) -> Deliver:
        return sink_deliver(bridge.name, bridge.config, kafka, self.prepare(systems, bridge, kafka),
                            self.transforms_before_writer)

    def run_batch(self, systems: Systems, bridge: Bridge, position: Offsets) -> BatchReport:
        from connectors.framework.sink_batch import run_kafka_sink_batch

        kafka = systems.kafka.admin()
        deliver = self.deliver(systems, bridge, kafka)
        with systems.spark.batch_session(bridge.name) as spark:
            return sink_report(run_kafka_sink_batch(spark, bridge.config, kafka, position, bridge.batch,
                                                    bridge.consumer_group, deliver))

    def open_stream(self, systems: Systems, bridge: Bridge, position: Offsets | None):
        from connectors.framework.sink_stream import Rounds, open_kafka_sink_stream

        kafka = systems.kafka.admin()
        # Prepared again when the source's partitions change (as Kafka Connect starts a connector again on a
        # reconfiguration): a target may no longer fit the source.
        prepare = functools.partial(self.deliver, systems, bridge, kafka)
        landings = self.landings(systems, bridge, kafka) if self.landings is not None else None
        return open_kafka_sink_stream(systems, bridge, position, prepare, Rounds(self.linger_s(bridge.config)), landings)


def sink_deliver(bridge_name: str, config: ConnectorConfig, kafka: KafkaAdmin, open_writer: OpenWriter,
                 transforms_before_writer: bool = False) -> Deliver:
    """The executors' delivery of a Kafka-reading sink: its writer behind the shared task body (sink_writer.py), which
    runs the bridge's transforms first when `transforms_before_writer`."""
    from connectors.kafka.dead_letter import dead_letter_client_config
    from connectors.framework.sink_writer import TallySettings, write_records
    from connectors.transforms.columnar import ColumnarChain

    # Only the error keys travel to the tasks: a plugin's own config class need not be importable there.
    errors = ErrorHandlingKeys.model_construct(**{name: getattr(config, name) for name in ErrorHandlingKeys.model_fields})
    chain = getattr(config, "transforms", None) if transforms_before_writer else None
    settings = TallySettings(bridge_name, errors, dead_letter_client_config(kafka, config),
                             ColumnarChain.of(chain) if chain else None)
    return functools.partial(write_records, settings, open_writer)
