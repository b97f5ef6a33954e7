"""Pub/Sub -> Kafka through the Dagster asset, against the pstest emulator and the real local Kafka."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from bridge_assets.definitions import build_definitions
from connectors.cloud_pubsub_source.partitioning import java_string_hash
from tests.e2e.helpers import (
    cli_run, cloud_source_bridges_file, create_pubsub_topic, drain, kafka_admin, kill_run_midway, materialize_bridge,
    publish_pubsub_messages,
)

pytestmark = pytest.mark.e2e


def _consume_all(topic: str, expected: int, timeout_s: float = 60):
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "test-reader",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in kafka_admin().partitions([topic])[topic]])
    records, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = consumer.consume(1000, 1.0)
        records += [m for m in batch if m.error() is None]
        if len(records) >= expected and not batch:
            break  # one more empty poll after reaching the count, so extra records would show
    consumer.close()
    return records


def test_messages_become_exactly_one_record_each_with_key_timestamp_and_partition(stack, spark, tmp_path, unique):
    topic, name = f"src-{unique}", f"src_{unique}"
    kafka_admin().create_topic(topic, partitions=3)
    subscription = create_pubsub_topic(topic)
    an_hour_ago = int(time.time() * 1000) - 3_600_000  # older ones would be deleted by the broker's time retention
    sent = {f"m{i}".encode(): {"user": f"user-{i % 7}", "ts": str(an_hour_ago + i)} for i in range(250)}
    publish_pubsub_messages(topic, list(sent.items()))
    defs = build_definitions(cloud_source_bridges_file(tmp_path, name, subscription, topic, {
        "kafka.key.attribute": "user", "kafka.timestamp.attribute": "ts",
        "kafka.partition.scheme": "hash_key", "kafka.partition.count": 3, "cps.maxBatchSize": 50}))

    metadata = materialize_bridge(defs, name)
    records = _consume_all(topic, len(sent))
    assert sorted(r.value() for r in records) == sorted(sent)
    for r in records:
        attributes = sent[r.value()]
        assert r.key() == attributes["user"].encode()
        assert r.timestamp()[1] == int(attributes["ts"])
        assert r.partition() == abs(java_string_hash(attributes["user"])) % 3
    assert metadata["records_written"].value == metadata["messages_acked"].value == 250
    assert drain(subscription) == []  # everything was acknowledged

    # A second run finds nothing and writes nothing.
    assert materialize_bridge(defs, name)["records_written"].value == 0


def test_attributes_as_headers_and_structs_as_json(stack, spark, tmp_path, unique):
    topic, name = f"hdr-{unique}", f"hdr_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    publish_pubsub_messages(topic, [(b"payload", {"a": "1", "b": "2"})])
    defs = build_definitions(cloud_source_bridges_file(tmp_path, name, subscription, topic, {"kafka.record.headers": True}))
    materialize_bridge(defs, name)
    [record] = _consume_all(topic, 1)
    assert record.value() == b"payload" and record.headers() == [("a", b"1"), ("b", b"2")]

    json_topic, json_name = f"json-{unique}", f"json_{unique}"
    kafka_admin().create_topic(json_topic, partitions=1)
    json_subscription = create_pubsub_topic(json_topic)
    publish_pubsub_messages(json_topic, [(b"payload", {"b": "2", "a": "1"})])
    defs = build_definitions(cloud_source_bridges_file(tmp_path, json_name, json_subscription, json_topic, {
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": False}))
    materialize_bridge(defs, json_name)
    [record] = _consume_all(json_topic, 1)
    assert record.value() == b'{"message":"cGF5bG9hZA==","a":"1","b":"2"}'


def test_a_run_killed_between_write_and_ack_loses_nothing(stack, tmp_path, unique):
    topic, name = f"srckill-{unique}", f"srckill_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    expected = {f"v{i}".encode() for i in range(20_000)}
    publish_pubsub_messages(topic, [(v, {}) for v in expected])
    command, env = cli_run(tmp_path, cloud_source_bridges_file(tmp_path, name, subscription, topic, {"cps.maxBatchSize": 100}),
                           name)
    admin = kafka_admin()
    kill_run_midway(command, env, lambda: sum(admin.end_offsets({topic: [0, 1]})[topic].values()) > 0)
    time.sleep(11)  # the emulator's 10 s ack deadline: what the killed run leased comes back after it

    subprocess.run(command, env=env, check=True, capture_output=True)
    values = [r.value() for r in _consume_all(topic, len(expected))]
    assert set(values) == expected  # nothing lost; what was written but not acked came again
    assert drain(subscription) == []


def test_streaming_pull_moves_every_message_once(stack, spark, tmp_path, unique):
    topic, name = f"stream-{unique}", f"stream_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    sent = {f"s{i}".encode() for i in range(300)}
    publish_pubsub_messages(topic, [(v, {}) for v in sent])
    defs = build_definitions(cloud_source_bridges_file(tmp_path, name, subscription, topic, {
        "cps.streamingPull.enabled": True, "cps.streamingPull.parallelStreams": 2,
        "cps.streamingPull.flowControlMessages": 50, "kafka.partition.count": 2}))

    metadata = materialize_bridge(defs, name)
    assert sorted(r.value() for r in _consume_all(topic, len(sent))) == sorted(sent)
    assert metadata["messages_acked"].value == 300
    assert drain(subscription) == []
