"""What a Kafka sink's tasks commit to the bridge's Kafka Connect group (`connect-<bridge>`) once the target has
acknowledged records: the position past them, with the counts moved so far and the id of the stream or batch that
moved them as the commit's metadata. An always-on stream commits after every round (stream_task.py), a batch after
each part it delivers (spark_read.BatchProgress).

Such a commit past the position a run recorded was delivered by a run that did not live to record it (killed):
the next run starts there, re-sending at most what that run had in flight.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from connectors.framework.sink_tally import COUNTERS

if TYPE_CHECKING:
    from connectors.kafka.admin import KafkaAdmin, Offsets


@dataclass(frozen=True)
class Landed:
    """Where a sink writing to Kafka put the partition's last acknowledged record: the source position past it and the
    target offset past its copy (the pair MirrorMaker 2 calls an offset sync)."""

    source: int
    target: int


class Landings(Protocol):
    """A sink writing to Kafka, on the driver of its always-on stream: where each start of the stream begins, and
    where the records delivered since the last progress read landed (SinkTally.landed). The Kafka sink writes
    MirrorMaker 2's checkpoints from them."""

    def started(self, position: Offsets) -> None:
        """The stream (again) starts at `position`: nothing of it has landed yet."""

    def landed(self, places: dict[tuple[str, int], Landed]) -> tuple[dict[str, int], tuple[str, ...]]:
        """Each partition's last record delivered since the last call, and where it landed; returns counts to add to
        the progress report and warnings."""


@dataclass(frozen=True)
class DeliveredCommit:
    """One partition's position and counts as a stream or a batch commits them (Kafka offset commit metadata)."""

    writer_id: str  # the stream's or the batch's id
    counts: dict[str, int]
    landed: Landed | None = None  # a Kafka target's: where the last record delivered landed

    def to_metadata(self, counters: tuple[str, ...] = COUNTERS) -> str:
        """`counters`: the names of the writer's counts (a Kafka sink's tally's, or a sink's own), in their order."""
        value: dict = {"stream": self.writer_id, "counts": [self.counts.get(n, 0) for n in counters]}
        if self.landed is not None:
            value["landed"] = [self.landed.source, self.landed.target]
        return json.dumps(value, separators=(",", ":"))

    @staticmethod
    def from_metadata(text: str | None, counters: tuple[str, ...] = COUNTERS) -> DeliveredCommit | None:
        """None for a commit that is not ours (Kafka Connect's own, empty); `counters` as it was written with."""
        try:
            value = json.loads(text or "")
            # A commit made before a count was added (an upgrade) has fewer: those are 0.
            landed = Landed(*value["landed"]) if "landed" in value else None
            return DeliveredCommit(value["stream"], {**dict.fromkeys(counters, 0), **dict(zip(counters, value["counts"]))},
                                   landed)
        except (ValueError, KeyError, TypeError):
            return None


def past_delivered(kafka: KafkaAdmin, group: str, partitions: dict[str, list[int]], position: Offsets) -> Offsets:
    """`position`, moved up to any delivered commit of the group that is past it."""
    moved = {t: dict(ps) for t, ps in position.items()}
    for (topic, partition), (offset, metadata) in kafka.commits(group, partitions).items():
        if DeliveredCommit.from_metadata(metadata) is not None and offset > moved.get(topic, {}).get(partition, -1):
            moved.setdefault(topic, {})[partition] = offset
    return moved
