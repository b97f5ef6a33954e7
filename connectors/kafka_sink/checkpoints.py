"""MirrorMaker 2's consumer-group checkpoints, so that consumers of the source can fail over to the target at
the right place: after each batch (or each interval of a stream), every source group's committed offset on a
replicated partition is translated into the target's offset and written to `<source alias>.checkpoints.internal`
on the target in MM2's wire format (what `RemoteClusterUtils.translateOffsets` and MM2-aware tools read); with
`sync.group.offsets.enabled` it is also committed to the same group on the target, as MM2 does, when that
group has no active member there (and only forward).

How offsets translate: one batch replicates, per partition, the source range [start, end) into the target
range between the target's end offsets before and after the batch (only this bridge writes its target
partitions, one run at a time). An always-on stream's range runs from the target's end offsets where the stream
started, or from the end of the range written last, to where its last record acknowledged landed
(plugin._StreamCheckpoints), every emit.checkpoints.interval.seconds. When both ranges have the same length (no record skipped, dead-lettered or
compacted away), every offset maps exactly; otherwise only the ends do, and an offset inside maps to the
target range's start: the consumer reads some records again, it never skips one. A group behind the batch's
range keeps the checkpoint an earlier batch wrote (the topic is compacted by group and partition).
"""

from __future__ import annotations

import logging
import re
import struct
from dataclasses import dataclass

from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import client_logger

log = logging.getLogger(__name__)
VERSION = 0


@dataclass(frozen=True)
class OffsetSync:
    source_start: int
    source_end: int
    target_start: int
    target_end: int

    def translate(self, upstream: int) -> int | None:
        """The target offset a consumer committed at `upstream` on the source resumes from; None when the
        offset is outside this batch's range."""
        if not self.source_start <= upstream <= self.source_end:
            return None
        if self.target_end - self.target_start == self.source_end - self.source_start:
            return self.target_start + (upstream - self.source_start)
        return self.target_end if upstream == self.source_end else self.target_start


def _string(value: str) -> bytes:  # Kafka's protocol STRING: int16 length, UTF-8 bytes
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def checkpoint_key(group: str, topic: str, partition: int) -> bytes:
    """Checkpoint.KEY_SCHEMA: group, topic (the target's name), partition."""
    return _string(group) + _string(topic) + struct.pack(">i", partition)


def checkpoint_value(upstream: int, downstream: int, metadata: str = "") -> bytes:
    """Checkpoint.HEADER_SCHEMA (version) then VALUE_SCHEMA_V0: upstreamOffset, offset, metadata."""
    return struct.pack(">hqq", VERSION, upstream, downstream) + _string(metadata)


def checkpoints_topic(source_alias: str) -> str:
    return f"{source_alias}.checkpoints.internal"  # MM2's DefaultReplicationPolicy.checkpointsTopic


def _patterns(spec: str) -> list[re.Pattern]:
    return [re.compile(part.strip()) for part in spec.split(",") if part.strip()]


def replicated_groups(source: KafkaAdmin, include: str, exclude: str) -> list[str]:
    included, excluded = _patterns(include), _patterns(exclude)
    return [group for group in source.consumer_groups()
            if any(p.fullmatch(group) for p in included) and not any(p.fullmatch(group) for p in excluded)]


def target_ends(config, source: KafkaAdmin, target: KafkaAdmin) -> dict[str, dict[int, int]]:
    """The target topics' end offsets, by source topic and partition (before and after a batch: its OffsetSyncs)."""
    sources = source.partitions(config.topic_list() or None, config.topics_regex)
    names = {config.target_topic(topic): topic for topic in sources}
    ends = target.end_offsets(target.partitions(list(names)))
    return {names[name]: parts for name, parts in ends.items()}


def write_checkpoints(config, source: KafkaAdmin, target: KafkaAdmin, syncs: dict[tuple[str, int], OffsetSync]) -> int:
    """Translate and write the checkpoints of every replicated group; the number written."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    if not syncs:
        return 0
    partitions: dict[str, list[int]] = {}
    for topic, partition in syncs:
        partitions.setdefault(topic, []).append(partition)
    topic = checkpoints_topic(config.source_cluster_alias)
    target.create_topic(topic, 1, {"cleanup.policy": "compact"}, config.target_topic_replication_factor)
    producer = Producer({**target.connection.librdkafka_config(), "enable.idempotence": True, "acks": "all",
                         "logger": client_logger(), "log_level": 3})
    written = 0
    for group in replicated_groups(source, config.groups, config.groups_exclude):
        translated = []
        for source_topic, offsets in source.committed_offsets(group, partitions).items():
            for partition, upstream in offsets.items():
                downstream = syncs[(source_topic, partition)].translate(upstream)
                if downstream is None:
                    continue
                remote = config.target_topic(source_topic)
                producer.produce(topic, key=checkpoint_key(group, remote, partition),
                                 value=checkpoint_value(upstream, downstream))
                translated.append(TopicPartition(remote, partition, downstream))
                written += 1
        if translated and config.sync_group_offsets_enabled:
            _commit_forward(target, group, translated, Consumer)
    if producer.flush(30):
        raise RuntimeError(f"Kafka at {config.target_bootstrap_servers} did not acknowledge the checkpoints")
    return written


def _commit_forward(target: KafkaAdmin, group: str, translated: list, consumer_class) -> None:
    """Commit the translated offsets for `group` on the target where they move it forward; a group with
    active members there refuses the commit, and is left alone (as MM2 does)."""
    from confluent_kafka import KafkaException

    consumer = consumer_class({**target.connection.librdkafka_config(), "group.id": group,
                               "enable.auto.commit": False, "logger": client_logger(), "log_level": 3})
    try:
        current = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(translated, timeout=10)}
        forward = [tp for tp in translated if tp.offset > current.get((tp.topic, tp.partition), -1)]
        if forward:
            consumer.commit(offsets=forward, asynchronous=False)
    except KafkaException as exc:
        log.warning("group %s: offsets not synced to the target (%s); its checkpoints are written", group,
                    exc.args[0].str() if exc.args else exc)
    finally:
        consumer.close()
