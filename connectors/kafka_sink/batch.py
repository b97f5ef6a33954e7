"""Driver side of the Kafka -> Kafka sink: the target topics made ready, then one micro-batch of the shared
Kafka sink plan."""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.errors import BatchError
from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.dead_letter import HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES, dead_letter_client_config
from connectors.kafka.sink_batch import SinkBatchResult, run_kafka_sink_batch
from connectors.kafka.transactions import PositionsTopic, slot_of
from connectors.kafka_sink.checkpoints import OffsetSync, write_checkpoints
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.kafka_sink.exactly_once import POSITIONS_PARTITIONS, position_key, produce_in_transactions
from connectors.kafka_sink.write import ReplicaTask, produce_arrow_batches
from connectors.outage import kafka_outages_named


def prepare_targets(config: KafkaSinkConfig, source: KafkaAdmin, target: KafkaAdmin) -> int:
    """Each source topic's target exists with enough partitions (created like its source when allowed);
    the largest record any of them may carry."""
    sources = source.partitions(config.topic_list() or None, config.topics_regex)
    if not sources:
        return 1_048_588
    limits = source.topic_max_message_bytes(list(sources))
    wanted = {config.target_topic(topic): topic for topic in sources}
    with kafka_outages_named(config.target_bootstrap_servers, "looking up the target topics"):
        existing = target.partitions(None, "|".join(re.escape(name) for name in wanted))
        for name, topic in wanted.items():
            count = len(sources[topic])
            if name not in existing:
                if not config.target_topic_create:
                    raise BatchError(f"target topic {name} does not exist on {config.target_bootstrap_servers} "
                                     "(target.topic.create=false)")
                target.create_topic(name, count, {"max.message.bytes": str(limits[topic])},
                                    config.target_topic_replication_factor)
            elif config.target_partition == "same" and len(existing[name]) < max(sources[topic]) + 1:
                raise BatchError(f"target topic {name} has {len(existing[name])} partitions, source topic {topic} "
                                 f"has {count}: target.partition=same needs as many (or target.partition=key)")
    return max(limits.values())


def _target_ends(config: KafkaSinkConfig, source: KafkaAdmin, target: KafkaAdmin) -> Offsets:
    """The target topics' end offsets, by source topic and partition."""
    sources = source.partitions(config.topic_list() or None, config.topics_regex)
    names = {config.target_topic(topic): topic for topic in sources}
    ends = target.end_offsets(target.partitions(list(names)))
    return {names[name]: parts for name, parts in ends.items()}


def _with_transactions(task: ReplicaTask, bridge_name: str, source: KafkaAdmin, target: KafkaAdmin,
                       recorded: Offsets) -> tuple[ReplicaTask, Offsets]:
    """The task with the positions topic on the target (made when missing), and the recorded offsets moved up to
    what the transactions committed: a run killed after its commit left the metadata behind."""
    config = task.config
    positions = PositionsTopic(config.positions_topic_name(bridge_name), config.target_connection().librdkafka_config())
    with kafka_outages_named(config.target_bootstrap_servers, f"reading the positions topic {positions.name}"):
        partitions = positions.ensure_hashed(target, POSITIONS_PARTITIONS)
        sources = source.partitions(config.topic_list() or None, config.topics_regex)
        keys = {position_key(t, p): (t, p) for t, ps in sources.items() for p in ps}
        committed = positions.latest_by_key({key: slot_of(key, partitions) for key in keys})
    moved = {t: dict(ps) for t, ps in recorded.items()}
    for key, value in committed.items():
        topic, partition = keys[key]
        if value["next_offset"] > moved.get(topic, {}).get(partition, -1):
            moved.setdefault(topic, {})[partition] = value["next_offset"]
    return dataclasses.replace(task, positions=positions, positions_partitions=partitions), moved


@dataclass(frozen=True)
class ReplicaBatchResult:
    batch: SinkBatchResult
    checkpoints: int  # written after the batch
    checkpoint_problem: str | None = None  # why they were not: the records are replicated all the same


def run_replica_batch(spark: SparkSession, bridge_name: str, config: KafkaSinkConfig, kafka: KafkaAdmin,
                      recorded: Offsets, batch: BatchSettings, consumer_group: str) -> ReplicaBatchResult:
    target = KafkaAdmin(config.target_connection())
    largest = prepare_targets(config, kafka, target)
    task = ReplicaTask(bridge_name, config, dead_letter_client_config(kafka, config),
                       min(largest + HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES), batch.outage_timeout_seconds)
    deliver = produce_arrow_batches
    if config.exactly_once:
        task, recorded = _with_transactions(task, bridge_name, kafka, target, recorded)
        deliver = produce_in_transactions
    before = _target_ends(config, kafka, target) if config.checkpoints else {}
    result = run_kafka_sink_batch(spark, config, kafka, recorded, batch, consumer_group,
                                  functools.partial(deliver, task))
    if not config.checkpoints or not result.plan.ranges:
        return ReplicaBatchResult(result, 0)
    # As MirrorMaker 2's checkpoint connector runs apart from its source connector, checkpoints that cannot
    # be written fail nothing: the records are replicated and their offsets recorded; the next batch tries again.
    try:
        after = _target_ends(config, kafka, target)
        syncs = {(r.topic, r.partition): OffsetSync(r.start, r.end, before[r.topic][r.partition],
                                                    after[r.topic][r.partition])
                 for r in result.plan.ranges if r.partition in before.get(r.topic, {})}  # a topic new since
        return ReplicaBatchResult(result, write_checkpoints(config, kafka, target, syncs))
    except Exception as exc:  # noqa: BLE001 - any failure here is reported the same way
        return ReplicaBatchResult(result, 0, f"consumer-group checkpoints not written: {type(exc).__name__}: {exc}")
