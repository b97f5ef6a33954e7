"""batch.min_partitions: a batch's offset ranges cut into pieces so every core has work, and which piece of a
partition may commit its progress."""

from __future__ import annotations

import pytest
import yaml

from connectors.bridges_file import BridgeConfigError, load_bridges
from connectors.kafka.admin import PartitionRange
from connectors.framework.spark_read import split_ranges


def test_one_partition_becomes_as_many_pieces_covering_it_once_in_order():
    pieces = split_ranges([PartitionRange("t", 0, 100, 1100)], 4)
    assert [(p.start, p.end) for p, _ in pieces] == [(100, 350), (350, 600), (600, 850), (850, 1100)]
    assert [first for _, first in pieces] == [True, False, False, False]


def test_pieces_follow_each_partitions_share_and_reach_at_least_the_count():
    ranges = [PartitionRange("t", 0, 0, 900), PartitionRange("t", 1, 0, 100), PartitionRange("t", 2, 0, 0)]
    pieces = split_ranges(ranges, 4)
    assert len(pieces) >= 4
    for r in ranges:  # every partition's pieces cover exactly its range
        mine = [p for p, _ in pieces if p.partition == r.partition]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
    assert len([p for p, _ in pieces if p.partition == 0]) > len([p for p, _ in pieces if p.partition == 1])


def test_enough_ranges_or_a_few_records_are_not_cut():
    ranges = [PartitionRange("t", p, 0, 1000) for p in range(4)]
    assert split_ranges(ranges, 2) == [(r, True) for r in ranges]
    assert [(p.start, p.end) for p, _ in split_ranges([PartitionRange("t", 0, 5, 7)], 8)] == [(5, 6), (6, 7)]


def _bridges(tmp_path, config: dict, connector: str = "CloudPubSubSinkConnector"):
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": "b", "connector": connector, "batch": {"min_partitions": 4},
                                                 "config": {"topics": "t", **config}}]}))
    return load_bridges(path)


def test_only_a_delivery_that_does_not_keep_order_takes_min_partitions(tmp_path):
    cloud = {"cps.project": "p", "cps.topic": "t"}
    [bridge] = _bridges(tmp_path, cloud)
    assert bridge.batch.min_partitions == 4
    with pytest.raises(BridgeConfigError, match="batch.min_partitions: CloudPubSubSinkConnector cannot split .* "
                                                "orderingKeySource=key"):
        _bridges(tmp_path, {**cloud, "orderingKeySource": "key"})
    # A connector that does not declare it keeps each partition's order.
    with pytest.raises(BridgeConfigError, match="PulsarSinkConnector cannot split .* keeps each partition's records"):
        _bridges(tmp_path, {"pulsar.service.url": "pulsar://h:6650"}, "PulsarSinkConnector")
