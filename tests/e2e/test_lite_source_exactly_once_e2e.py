"""PubSubLiteSourceConnector with exactly.once.support=required, against the local Lite server and Kafka: records
and the next cursors commit in one Kafka transaction, and a run whose other records of its place (the asset's
metadata, Lite's committed cursor) were lost goes on from the transactions instead of writing again."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from dagster import DagsterInstance

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import kafka_admin, materialize_bridge
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, lite_connection, publish_lite

pytestmark = pytest.mark.e2e
EXACTLY_ONCE = {"exactly.once.support": "required"}


def read_committed(topic: str) -> list:
    """Every record a read_committed consumer sees, from the beginning to the last stable offset."""
    admin = kafka_admin()
    ends = admin.end_offsets(admin.partitions([topic]), isolation_level="read_committed")[topic]
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "eos-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
    records, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < 2:
        batch = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
        if batch:
            records += batch
            quiet_since = time.monotonic()
    consumer.close()
    return records


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
    assert sorted(r.value() for r in read_committed(kafka_topic)) == sorted(f"m{i}".encode() for i in range(300))
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
    values = [r.value() for r in read_committed(kafka_topic)]
    assert len(values) == len(set(values)) == 330
