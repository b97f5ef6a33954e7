"""PubSubLiteSourceConnector with exactly.once.support=required, against the local Lite server and Kafka: records
and the next cursors commit in one Kafka transaction, and a run whose other records of its place (the asset's
metadata, Lite's committed cursor) were lost goes on from the transactions instead of writing again; a bridge
switched between micro-batch and always-on mode goes on from the same transactions."""

from __future__ import annotations

import os
import subprocess

import pytest
from dagster import DagsterInstance

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import cli_run, interrupt, kafka_admin, materialize_bridge, read_committed, wait
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, lite_connection, publish_lite

pytestmark = pytest.mark.e2e
EXACTLY_ONCE = {"exactly.once.support": "required"}


def test_records_and_cursors_commit_together_and_a_lost_place_is_found_in_the_transactions(
        stack, spark, tmp_path, unique):
    name, kafka_topic = f"eos_lite_{unique}", f"eos-from-lite-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=3)
    topic, subscription = create_lite_topic(f"eos-lite-{unique}", partitions=3)
    defs = build_definitions(lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", {
        "pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic, **EXACTLY_ONCE}))
    publish_lite(topic, [{"data": f"m{i}".encode(), "ordering_key": f"k{i % 7}"} for i in range(300)])

    first = materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert first["messages_written"].value == 300
    written = read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], kafka_topic, 3)
    assert sorted(r.value() for r in written) == sorted(f"m{i}".encode() for i in range(300))
    # Keyed records land where a Java producer (murmur2) puts them, as without exactly once.
    assert {r.key(): r.partition() for r in written} == java_partitions({r.key() for r in written}, 3)
    positions = f"bridge-offsets.{name}"
    assert len(kafka_admin().partitions([positions])[positions]) == 3  # a slot per Lite partition

    # The bridge's other records of its place are lost: a new Dagster instance (no metadata) and Lite's cursors
    # back at 0. Without the transactions the run would write all 300 again.
    service = lite_connection().cursor_service(subscription.location.region)
    for partition in range(3):
        service.commit_cursor(request={"subscription": str(subscription), "partition": partition,
                                       "cursor": {"offset": 0}})
    publish_lite(topic, [{"data": f"n{i}".encode()} for i in range(30)])
    second = materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert second["messages_written"].value == 30
    assert set(second["resumed_from_transactions"].value) == {"0", "1", "2"}
    values = [r.value() for r in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], kafka_topic, 3)]
    assert len(values) == len(set(values)) == 330


def test_a_bridge_switched_between_batch_and_always_on_neither_copies_nor_skips(stack, spark_remote, tmp_path, unique):
    name, kafka_topic = f"eos_switch_{unique}", f"eos-switch-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=2)
    topic, subscription = create_lite_topic(f"eos-switch-{unique}", partitions=2)
    config = {"pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic, **EXACTLY_ONCE}
    engine = {"BRIDGE_SPARK_REMOTE": spark_remote}
    (tmp_path / "batch").mkdir()
    (tmp_path / "always_on").mkdir()
    batch_file = lite_bridges_file(tmp_path / "batch", name, "PubSubLiteSourceConnector", config)
    always_on_file = lite_bridges_file(tmp_path / "always_on", name, "PubSubLiteSourceConnector", config, None,
                                       {"host": None, "commit_interval_ms": 1000})

    def committed() -> list[bytes]:
        return [r.value() for r in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], kafka_topic, 2, 1.0)]

    def batch(wave: str) -> None:
        publish_lite(topic, [{"data": f"{wave}{i}".encode()} for i in range(100)])
        command, env = cli_run(tmp_path, batch_file, name, engine)
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]

    batch("a")
    assert len(committed()) == 100
    command, env = cli_run(tmp_path, always_on_file, name, engine, always_on=True)
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        publish_lite(topic, [{"data": f"b{i}".encode()} for i in range(100)])
        wait(lambda: len(set(committed())) >= 200, "the always-on run moved the second wave")
    finally:
        interrupt(run)
    batch("c")
    values = committed()
    expected = {f"{wave}{i}".encode() for wave in "abc" for i in range(100)}
    assert set(values) == expected and len(values) == len(expected), \
        f"{len(values)} records, {len(set(values))} distinct, {len(expected - set(values))} missing"


def java_partitions(keys: set[bytes], partitions: int) -> dict[bytes, int]:
    """Where Kafka's Java producer puts each key: librdkafka's murmur2 partitioner (its Java-compatible one) on a
    topic of that many partitions, asked by producing each key once."""
    from confluent_kafka import Producer

    probe = f"murmur2-probe-{partitions}-{os.getpid()}"
    kafka_admin().create_topic(probe, partitions=partitions)
    placed: dict[bytes, int] = {}

    def delivered(err, msg) -> None:
        assert err is None, err
        placed[msg.key()] = msg.partition()

    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "partitioner": "murmur2_random",
                         "log_level": 3})
    for key in keys:
        producer.produce(probe, b"", key=key, on_delivery=delivered)
    producer.flush(30)
    return placed
