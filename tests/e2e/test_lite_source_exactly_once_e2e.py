"""PubSubLiteSourceConnector with exactly.once.support=required, against the local Lite server and Kafka: records
and the next cursors commit in one Kafka transaction, and a run whose other records of its place (the asset's
metadata, Lite's committed cursor) were lost goes on from the transactions instead of writing again."""

from __future__ import annotations

import os
import pytest
from dagster import DagsterInstance

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import kafka_admin, materialize_bridge, read_committed
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
