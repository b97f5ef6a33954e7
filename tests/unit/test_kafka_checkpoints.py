"""MirrorMaker 2 checkpoints: offset translation over one replicated range, and the wire format of
Checkpoint.java (key: group, topic, partition; value: version, upstreamOffset, offset, metadata)."""

from __future__ import annotations

import struct

from connectors.framework.delivered import DeliveredCommit, Landed
from connectors.framework.sink_tally import COUNTERS
from connectors.kafka_sink.checkpoints import OffsetSync, checkpoint_key, checkpoint_value


def test_a_contiguous_range_maps_every_offset_exactly():
    sync = OffsetSync(source_start=100, source_end=150, target_start=7, target_end=57)
    assert [sync.translate(u) for u in (100, 120, 150)] == [7, 27, 57]
    assert sync.translate(99) is None and sync.translate(151) is None  # outside: an earlier checkpoint stands


def test_a_range_with_gaps_maps_its_ends_and_rereads_inside():
    sync = OffsetSync(source_start=100, source_end=150, target_start=7, target_end=50)  # 7 records not copied
    assert [sync.translate(u) for u in (100, 120, 150)] == [7, 7, 50]  # inside: from the start, never past


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    return data[at + 2:at + 2 + length].decode(), at + 2 + length


def test_the_wire_format_is_mirror_makers():
    key = checkpoint_key("billing", "backup.orders", 3)
    group, at = _string(key, 0)
    topic, at = _string(key, at)
    assert (group, topic, struct.unpack_from(">i", key, at)[0], len(key)) == ("billing", "backup.orders", 3, at + 4)
    value = checkpoint_value(120, 27, "m")
    version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    assert (version, upstream, downstream, _string(value, 18)) == (0, 120, 27, ("m", len(value)))


def test_a_stream_commit_carries_where_its_last_record_landed_and_an_older_one_reads_without():
    commit = DeliveredCommit("s1", dict.fromkeys(COUNTERS, 2), Landed(source=41, target=44))
    assert DeliveredCommit.from_metadata(commit.to_metadata()) == commit
    older = DeliveredCommit("s1", dict.fromkeys(COUNTERS, 2))  # a sink that is not Kafka's, or from before
    assert '"landed"' not in older.to_metadata()
    assert DeliveredCommit.from_metadata(older.to_metadata()).landed is None
