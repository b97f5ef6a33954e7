"""KafkaSinkConnector as a plugin: Kafka -> another Kafka cluster, resuming from recorded source offsets."""

from __future__ import annotations

import dataclasses
import functools
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from connectors.endpoints import Endpoint
from connectors.framework.plugin_parts import kafka_source_label, sink_report
from connectors.framework.sink_plugin import KafkaSink, sink_deliver
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.kafka_sink.places import KAFKA_SINK_OFFSETS
from connectors.plugin import BatchReport, Bridge, Systems

if TYPE_CHECKING:  # Spark and the Kafka clients are imported by runs, not by the code location's load
    from pyspark.sql import SparkSession

    from connectors.bridge import BatchSettings
    from connectors.kafka.admin import KafkaAdmin, Offsets
    from connectors.framework.delivered import Landed, Landings
    from connectors.framework.sink_batch import SinkBatchResult


@dataclass(frozen=True)
class ReplicaBatchResult:
    batch: SinkBatchResult
    checkpoints: int  # written after the batch
    checkpoint_problem: str | None = None  # why they were not: the records are replicated all the same


def run_replica_batch(spark: SparkSession, bridge_name: str, config: KafkaSinkConfig, kafka: KafkaAdmin,
                      recorded: Offsets, batch: BatchSettings, consumer_group: str) -> ReplicaBatchResult:
    """The shared Kafka sink batch (sink_batch.py) with this sink's writer, between the target topics made ready and
    the consumer-group checkpoints written."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.framework.sink_batch import run_kafka_sink_batch
    from connectors.kafka_sink.checkpoints import OffsetSync, target_ends, write_checkpoints
    from connectors.kafka_sink.exactly_once import with_transactions
    from connectors.kafka_sink.write import ReplicaWriter, prepare_targets

    target = KafkaAdmin(config.target_connection())
    replica = prepare_targets(config, kafka, target, batch.outage_timeout_seconds)
    open_writer = functools.partial(ReplicaWriter, replica)
    if config.exactly_once:
        open_writer, recorded = with_transactions(replica, bridge_name, kafka, target, recorded)
    before = target_ends(config, kafka, target) if config.checkpoints else {}
    result = run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                  sink_deliver(bridge_name, config, kafka, open_writer, SINK.transforms_before_writer))
    if not config.checkpoints or not result.plan.ranges:
        return ReplicaBatchResult(result, 0)
    # As MirrorMaker 2's checkpoint connector runs apart from its source connector, checkpoints that cannot
    # be written fail nothing: the records are replicated and their offsets recorded; the next batch tries again.
    try:
        after = target_ends(config, kafka, target)
        syncs = {(r.topic, r.partition): OffsetSync(r.start, r.end, before[r.topic][r.partition],
                                                    after[r.topic][r.partition])
                 for r in result.plan.ranges if r.partition in before.get(r.topic, {})}  # a topic new since
        return ReplicaBatchResult(result, write_checkpoints(config, kafka, target, syncs))
    except Exception as exc:  # noqa: BLE001 - any failure here is reported the same way
        return ReplicaBatchResult(result, 0, f"consumer-group checkpoints not written: {type(exc).__name__}: {exc}")


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    with systems.spark.batch_session(bridge.name) as spark:
        result = run_replica_batch(spark, bridge.name, bridge.config, systems.kafka.admin(), position, bridge.batch,
                                   bridge.consumer_group)
    report = sink_report(result.batch)
    problem = (result.checkpoint_problem,) if result.checkpoint_problem else ()
    return dataclasses.replace(report, values={**report.values, "checkpoints_written": result.checkpoints},
                               warnings=report.warnings + problem)


def _replica_writer(systems: Systems, bridge: Bridge, kafka: KafkaAdmin):
    """The always-on stream's writer. Under exactly once each round's records commit in their source partitions'
    transactions; a stream starting behind them (its group commits trail the transactions) reads again what a
    killed run had committed, and the writer drops it."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka_sink.exactly_once import with_transactions
    from connectors.kafka_sink.write import ReplicaWriter, prepare_targets

    config = bridge.config
    target = KafkaAdmin(config.target_connection())
    replica = prepare_targets(config, kafka, target, bridge.batch.outage_timeout_seconds)
    if config.exactly_once:
        # Each preparation (a stream's open, a restart for new partitions) keeps its tasks' slots apart.
        return with_transactions(replica, bridge.name, kafka, target, {}, keep_slots_for=uuid.uuid4().hex)[0]
    return functools.partial(ReplicaWriter, replica)


class _StreamCheckpoints:
    """The always-on stream's checkpoints (its Landings), every emit.checkpoints.interval.seconds: the source range
    delivered since the last ones and the target range it landed in translate the source groups' offsets, as a
    batch's range does. A range starts where the stream starts, at the target's end offsets then (only this bridge
    writes its target partitions); a range not yet written when the stream starts again (after a failure, or with a
    new partition) is dropped: the groups in it keep their earlier checkpoints, from which a failover reads again
    what it had read, and skips nothing."""

    def __init__(self, config: KafkaSinkConfig, kafka: KafkaAdmin):
        from connectors.kafka.admin import KafkaAdmin

        self._config, self._kafka, self._target = config, kafka, KafkaAdmin(config.target_connection())
        self._ranges: dict[tuple[str, int], tuple[Landed, Landed]] = {}  # (from, to) not written yet
        self._written_at = time.monotonic()

    def started(self, position: Offsets) -> None:
        from connectors.framework.delivered import Landed
        from connectors.kafka_sink.checkpoints import target_ends

        ends = target_ends(self._config, self._kafka, self._target)
        self._ranges = {(topic, partition): (Landed(offset, ends[topic][partition]),) * 2
                        for topic, offsets in position.items() for partition, offset in offsets.items()
                        if partition in ends.get(topic, {})}

    def landed(self, places: dict[tuple[str, int], Landed]) -> tuple[dict[str, int], tuple[str, ...]]:
        from connectors.kafka_sink.checkpoints import OffsetSync, write_checkpoints

        for key, place in places.items():
            if key in self._ranges and place.source > self._ranges[key][1].source:
                self._ranges[key] = (self._ranges[key][0], place)
        moved = {key: (start, end) for key, (start, end) in self._ranges.items() if end.source > start.source}
        if not moved or time.monotonic() - self._written_at < self._config.emit_checkpoints_interval_seconds:
            return {"checkpoints_written": 0}, ()
        self._written_at = time.monotonic()
        syncs = {key: OffsetSync(start.source, end.source, start.target, end.target)
                 for key, (start, end) in moved.items()}
        try:  # as in a batch, checkpoints that cannot be written fail nothing: the range is tried again next time
            written = write_checkpoints(self._config, self._kafka, self._target, syncs)
        except Exception as exc:  # noqa: BLE001 - any failure here is reported the same way
            return {"checkpoints_written": 0}, (f"consumer-group checkpoints not written: {type(exc).__name__}: {exc}",)
        self._ranges.update({key: (end, end) for key, (_, end) in moved.items()})
        return {"checkpoints_written": written}, ()


def _stream_checkpoints(systems: Systems, bridge: Bridge, kafka: KafkaAdmin) -> Landings | None:
    return _StreamCheckpoints(bridge.config, kafka) if bridge.config.checkpoints else None


# The always-on stream. A round waits 5 ms for more records, its producer's linger.ms.
SINK = KafkaSink(prepare=_replica_writer, linger_s=lambda config: 0.005, landings=_stream_checkpoints,
                 transforms_before_writer=True)


def _cluster_label(bootstrap_servers: str) -> str:
    # The target cluster's first address as one asset key part: a topic of the same name on the source
    # cluster is another asset.
    return re.sub(r"[^A-Za-z0-9_]", "_", bootstrap_servers.split(",")[0].strip())


def _writes(bridge: Bridge) -> tuple[Endpoint, ...]:
    cfg = bridge.config
    return tuple(Endpoint(("kafka", _cluster_label(cfg.target_bootstrap_servers), cfg.target_topic(topic)), "kafka",
                          f"Kafka topic {cfg.target_topic(topic)} on {cfg.target_bootstrap_servers}")
                 for topic in cfg.topic_list())


def _route(bridge: Bridge) -> str:
    cfg = bridge.config
    return (f"Kafka {kafka_source_label(cfg)} -> Kafka {cfg.topic_rename_format} on {cfg.target_bootstrap_servers} "
            f"(partition {cfg.target_partition})")


CONNECTOR = SINK.plugin(
    name="KafkaSinkConnector",
    java_class="bridge.kafka.KafkaSinkConnector",
    config_model=KafkaSinkConfig,
    writes_to=(),
    uses=(),
    route=_route,
    writes=_writes,
    # Its own batch (exactly once in transactions) and position (the source offsets beside the target's).
    run_batch=_run_batch,
    position=KAFKA_SINK_OFFSETS,
    exactly_once_modes=("batch", "continuous"),
    example={"name": "orders_to_dr", "topics": "orders", "target.bootstrap.servers": "dr-kafka:9092"},
)
