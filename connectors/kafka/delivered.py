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
from typing import TYPE_CHECKING

from connectors.kafka.sink_tally import COUNTERS

if TYPE_CHECKING:
    from connectors.kafka.admin import KafkaAdmin, Offsets


@dataclass(frozen=True)
class DeliveredCommit:
    """One partition's position and counts as a stream or a batch commits them (Kafka offset commit metadata)."""

    writer_id: str  # the stream's or the batch's id
    counts: dict[str, int]

    def to_metadata(self) -> str:
        return json.dumps({"stream": self.writer_id, "counts": [self.counts.get(n, 0) for n in COUNTERS]},
                          separators=(",", ":"))

    @staticmethod
    def from_metadata(text: str | None) -> DeliveredCommit | None:
        """None for a commit that is not ours (Kafka Connect's own, empty)."""
        try:
            value = json.loads(text or "")
            # A commit made before a count was added (an upgrade) has fewer: those are 0.
            return DeliveredCommit(value["stream"], {**dict.fromkeys(COUNTERS, 0), **dict(zip(COUNTERS, value["counts"]))})
        except (ValueError, KeyError, TypeError):
            return None


def past_delivered(kafka: KafkaAdmin, group: str, partitions: dict[str, list[int]], position: Offsets) -> Offsets:
    """`position`, moved up to any delivered commit of the group that is past it."""
    moved = {t: dict(ps) for t, ps in position.items()}
    for (topic, partition), (offset, metadata) in kafka.commits(group, partitions).items():
        if DeliveredCommit.from_metadata(metadata) is not None and offset > moved.get(topic, {}).get(partition, -1):
            moved.setdefault(topic, {})[partition] = offset
    return moved
