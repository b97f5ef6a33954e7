"""KafkaSinkConnector with exactly.once.support=required, between the stack's two clusters: records and the source
offset after them commit in one transaction on the target (MirrorMaker 2's way under KIP-656), and a run whose other
records of its place (the asset's metadata, the Connect group's offsets) were lost goes on from the transactions
instead of writing again."""

from __future__ import annotations

import os
import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from dagster import DagsterInstance

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import kafka_admin, materialize_bridge, read_committed
from tests.e2e.test_kafka_sink_e2e import _target

pytestmark = pytest.mark.e2e


def _produce(topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % 3)
    assert producer.flush(30) == 0


def test_records_and_offsets_commit_together_and_a_lost_place_is_found_in_the_transactions(
        stack, spark, tmp_path, unique):
    topic, name = f"eos-repl-{unique}", f"eos_repl_{unique}"
    kafka_admin().create_topic(topic, partitions=3)
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "KafkaSinkConnector", "config": {
        "topics": topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
        "exactly.once.support": "required"}, "mode": "batch"}]}))
    defs = build_definitions(str(bridges))
    _produce(topic, [f"m{i}" for i in range(300)])

    first = materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert first["records_published"].value == 300
    assert sorted(r.value() for r in read_committed(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], topic, 3)) == sorted(f"m{i}".encode() for i in range(300))
    positions = f"bridge-offsets.{name}"
    assert len(_target().partitions([positions])[positions]) == 8  # on the target, beside the records

    # The bridge's other records of its place are lost: a new Dagster instance (no metadata) and its Connect
    # group gone. Without the transactions the run would write all 300 again.
    admin = AdminClient({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})  # kept until its answer
    [future] = admin.delete_consumer_groups([f"connect-{name}"]).values()
    future.result(30)
    _produce(topic, [f"n{i}" for i in range(30)])
    second = materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert second["records_published"].value == 30
    values = [r.value() for r in read_committed(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], topic, 3)]
    assert len(values) == len(set(values)) == 330


def test_records_a_filter_drops_are_never_written_and_a_lost_place_writes_nothing_twice(
        stack, spark, tmp_path, unique):
    """A Filter under exactly once: the dropped records (here the last ones of each partition) are not in any
    transaction, so the transactions' place is behind them; a run that lost its other places reads them again from
    there, drops them again and writes nothing twice."""
    topic, name = f"eos-replf-{unique}", f"eos_replf_{unique}"
    kafka_admin().create_topic(topic, partitions=3)
    t = "org.apache.kafka.connect.transforms."
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "KafkaSinkConnector", "config": {
        "topics": topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
        "exactly.once.support": "required", "transforms": "nodrop", "transforms.nodrop.type": t + "Filter",
        "transforms.nodrop.predicate": "isdrop", "predicates": "isdrop",
        "predicates.isdrop.type": t + "predicates.HasHeaderKey", "predicates.isdrop.name": "drop"},
        "mode": "batch"}]}))
    defs = build_definitions(str(bridges))
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(90):
        producer.produce(topic, value=f"m{i}".encode(), partition=i % 3,
                         headers=[("drop", b"1")] if i >= 60 else [])  # each partition's last 10 records
    assert producer.flush(30) == 0

    first = materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert (first["records_published"].value, first["records_skipped"].value) == (60, 30)

    admin = AdminClient({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    [future] = admin.delete_consumer_groups([f"connect-{name}"]).values()
    future.result(30)
    _produce(topic, [f"n{i}" for i in range(30)])
    second = materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert (second["records_published"].value, second["records_skipped"].value) == (30, 30)
    values = [r.value() for r in read_committed(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], topic, 3)]
    assert sorted(values) == sorted([f"m{i}".encode() for i in range(60)] + [f"n{i}".encode() for i in range(30)])
