"""Pub/Sub Lite -> Kafka through the Dagster asset, against the local Lite server and the real local Kafka."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from dagster import AssetKey, DagsterInstance, RunRequest, build_sensor_context

from asset_metadata import recorded_position
from bridge_assets.definitions import build_definitions
from connectors.pubsublite_source.plugin import LITE_CURSORS
from resources import default_resources
from tests.e2e.helpers import cli_run, kafka_admin, kill_run_midway, materialize_bridge
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, lite_connection, publish_lite

pytestmark = pytest.mark.e2e


def read_kafka(topic: str) -> list:
    """Every record of a topic, from the beginning."""
    import os

    admin = kafka_admin()
    partitions = admin.partitions([topic])
    if topic not in partitions:
        return []  # just made, and not yet in this broker's metadata (seen right after a broker restart)
    ends = admin.end_offsets(partitions)[topic]
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "test-reader",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
    want = sum(ends.values())
    records = []
    deadline = time.monotonic() + 60
    while len(records) < want and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            records.append(message)
    consumer.close()
    return records


def committed_cursors(subscription) -> dict[int, int]:
    client = lite_connection().cursor_service(subscription.location.region)
    return {c.partition: c.cursor.offset for c in client.list_partition_cursors(request={"parent": str(subscription)})}


def source_bridge(tmp_path, name: str, subscription, kafka_topic: str, batch: dict | None = None) -> str:
    return lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", {
        "pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic}, batch)


def test_messages_arrive_once_with_the_reference_mapping_and_cursors_move(stack, spark, tmp_path, unique):
    topic_id, name = f"lite-src-{unique}", f"lite_src_{unique}"
    kafka_topic = f"from-lite-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=3)
    topic, subscription = create_lite_topic(topic_id, partitions=3)
    defs = build_definitions(source_bridge(tmp_path, name, subscription, kafka_topic))
    instance = DagsterInstance.ephemeral()

    publish_lite(topic, [{"data": f"keyed-{i}".encode(), "ordering_key": f"k{i % 4}", "attributes": {"a": str(i)}}
                         for i in range(90)] + [{"data": f"plain-{i}".encode()} for i in range(30)])
    metadata = materialize_bridge(defs, name, instance)
    assert metadata["messages_written"].value == 120
    records = read_kafka(kafka_topic)
    assert sorted(r.value().decode() for r in records) == sorted(
        [f"keyed-{i}" for i in range(90)] + [f"plain-{i}" for i in range(30)])
    keyed = [r for r in records if r.value().startswith(b"keyed")]
    # Equal keys share a Kafka partition; attributes become headers; the key is the Lite key bytes.
    by_key: dict[bytes, set] = {}
    for r in keyed:
        by_key.setdefault(r.key(), set()).add(r.partition())
    assert sorted(by_key) == [b"k0", b"k1", b"k2", b"k3"] and all(len(p) == 1 for p in by_key.values())
    assert all(dict(r.headers())["a"] == r.value().decode().split("-")[1].encode() for r in keyed)
    plain = [r for r in records if r.value().startswith(b"plain")]
    assert all(r.key() is None for r in plain)
    assert len({r.partition() for r in plain}) == 3  # empty keys go round robin
    assert all(abs(r.timestamp()[1] - time.time() * 1000) < 120_000 for r in records)  # publish time

    heads = {int(p): o for p, o in metadata["head_cursors"].value.items()}
    assert sum(heads.values()) == 120
    assert recorded_position(instance, AssetKey(name), LITE_CURSORS) == heads
    assert committed_cursors(subscription) == heads  # committed only after Kafka took them

    publish_lite(topic, [{"data": f"second-{i}".encode()} for i in range(40)])
    metadata = materialize_bridge(defs, name, instance)
    assert metadata["messages_written"].value == 40
    assert sorted(r.value().decode() for r in read_kafka(kafka_topic) if r.value().startswith(b"second")) == sorted(
        f"second-{i}" for i in range(40))
    metadata = materialize_bridge(defs, name, instance)
    assert metadata["messages_written"].value == 0
    assert len(read_kafka(kafka_topic)) == 160


def test_event_time_wins_over_publish_time(stack, spark, tmp_path, unique):
    from google.cloud.pubsublite_v1 import types
    from google.protobuf.timestamp_pb2 import Timestamp

    from connectors.pubsublite.stream_publisher import LitePublisher, LitePublishSettings

    topic_id, name, kafka_topic = f"lite-et-{unique}", f"lite_et_{unique}", f"from-lite-et-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    topic, subscription = create_lite_topic(topic_id, partitions=1)
    event_ms = int(time.time() * 1000) - 3_600_000

    async def publish_with_event_time():
        channel = lite_connection().async_publish_channel(topic.location)
        publisher = LitePublisher(channel, str(topic), LitePublishSettings(), lambda origins: None)
        message = types.PubSubMessage.pb()(data=b"old", key=b"k", event_time=Timestamp(
            seconds=event_ms // 1000, nanos=(event_ms % 1000) * 1_000_000))
        await publisher.add(message, message.ByteSize(), None, 0)
        await publisher.close(30)
        await channel.close()

    import asyncio

    asyncio.run(publish_with_event_time())
    defs = build_definitions(source_bridge(tmp_path, name, subscription, kafka_topic))
    materialize_bridge(defs, name)
    (record,) = read_kafka(kafka_topic)
    assert record.timestamp()[1] == event_ms and record.key() == b"k" and record.value() == b"old"


def test_batch_bound_splits_the_backlog_and_the_sensor_sees_it(stack, spark, tmp_path, unique):
    topic_id, name, kafka_topic = f"lite-bl-{unique}", f"lite_bl_{unique}", f"from-lite-bl-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=2)
    topic, subscription = create_lite_topic(topic_id, partitions=2)
    defs = build_definitions(source_bridge(tmp_path, name, subscription, kafka_topic, batch={"max_records": 100}))
    instance = DagsterInstance.ephemeral()
    sensor = defs.resolve_sensor_def(f"{name}_backlog_sensor")

    def evaluate():
        with build_sensor_context(instance=instance, resources=default_resources()) as context:
            result = sensor.evaluate_tick(context)
        return result.run_requests or result.skip_message

    assert evaluate() == "no new messages"
    publish_lite(topic, [{"data": f"m{i}".encode()} for i in range(250)])
    requests = evaluate()
    assert isinstance(requests[0], RunRequest) and requests[0].tags["backlog_at_request"] == "250"
    moved = [materialize_bridge(defs, name, instance)["messages_written"].value for _ in range(3)]
    assert moved == [100, 100, 50]
    assert evaluate() == "no new messages"
    assert sorted(r.value() for r in read_kafka(kafka_topic)) == sorted(f"m{i}".encode() for i in range(250))


def test_a_run_killed_mid_batch_loses_nothing_and_commits_nothing(stack, tmp_path, unique):
    topic_id, name, kafka_topic = f"lite-crash-src-{unique}", f"lite_crash_src_{unique}", f"from-lite-crash-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=2)
    topic, subscription = create_lite_topic(topic_id, partitions=2)
    total = 40_000
    publish_lite(topic, [{"data": f"v-{i}".encode()} for i in range(total)])
    before = committed_cursors(subscription)
    command, env = cli_run(tmp_path, source_bridge(tmp_path, name, subscription, kafka_topic), name)

    def some_in_kafka() -> bool:
        admin = kafka_admin()
        return sum(admin.end_offsets(admin.partitions([kafka_topic]))[kafka_topic].values()) > 0

    kill_run_midway(command, env, started=some_in_kafka)
    assert committed_cursors(subscription) == before  # nothing committed for a run that did not finish
    subprocess.run(command, env=env, check=True, capture_output=True)
    values = {r.value().decode() for r in read_kafka(kafka_topic)}
    assert values == {f"v-{i}" for i in range(total)}  # every message, duplicates allowed
    assert sum(committed_cursors(subscription).values()) == total
