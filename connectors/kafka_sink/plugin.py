"""KafkaSinkConnector as a plugin: Kafka -> another Kafka cluster, resuming from recorded source offsets."""

from __future__ import annotations

import dataclasses
import re

from connectors.bridge import Bridge
from connectors.endpoints import Endpoint
from connectors.kafka.plugin_parts import (
    KAFKA_LAG, KAFKA_OFFSETS, SINK_KEYS, kafka_source_label, kafka_topics_read, sink_report,
)
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.plugin import BatchReport, ConnectorPlugin, Systems


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.kafka_sink.batch import run_replica_batch

    with systems.spark.batch_session(bridge.name) as spark:
        result = run_replica_batch(spark, bridge.name, bridge.config, systems.kafka.admin(), position, bridge.batch,
                                   bridge.consumer_group)
    report = sink_report(result.batch)
    problem = (result.checkpoint_problem,) if result.checkpoint_problem else ()
    return dataclasses.replace(report, values={**report.values, "checkpoints_written": result.checkpoints},
                               warnings=report.warnings + problem)


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


CONNECTOR = ConnectorPlugin(
    name="KafkaSinkConnector",
    java_class="bridge.kafka.KafkaSinkConnector",
    config_model=KafkaSinkConfig,
    kinds=("kafka", "spark"),
    systems=("kafka", "spark"),
    route=_route,
    run_batch=_run_batch,
    position=KAFKA_OFFSETS,
    signal=KAFKA_LAG,
    reads=kafka_topics_read,
    writes=_writes,
    keys=SINK_KEYS,
    exactly_once_modes=("batch",),
)
