"""Kafka -> Pub/Sub through the Dagster asset, against the real local Kafka and the pstest emulator."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from dagster import AssetKey, DagsterInstance, RunRequest, SkipReason, build_sensor_context

from bridge_assets.definitions import build_definitions
from asset_metadata import recorded_position
from connectors.framework.plugin_parts import KAFKA_OFFSETS
from resources import default_resources
from google.pubsub_v1.types import PubsubMessage

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub.request_publisher import RequestPublisher
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.write import publish_settings
from tests.e2e.helpers import (
    PROJECT, cli_run, create_pubsub_topic, drain, kafka_admin, materialize_bridge, produce, produce_to_partition,
    sink_bridges_file,
)

pytestmark = pytest.mark.e2e


def test_two_runs_move_every_record_once_and_resume(stack, spark, tmp_path, unique):
    topic, name = f"orders-{unique}", f"sink_{unique}"
    kafka_admin().create_topic(topic, partitions=3)
    subscription = create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic))
    instance = DagsterInstance.ephemeral()

    produce(topic, [(f"k{i % 5}", f"first-{i}") for i in range(300)])
    metadata = materialize_bridge(defs, name, instance)
    first = drain(subscription)
    assert sorted(m.data.decode() for m in first) == sorted(f"first-{i}" for i in range(300))
    assert {m.attributes["key"] for m in first} == {f"k{i}" for i in range(5)}
    assert metadata["records_published"].value == 300
    recorded = recorded_position(instance, AssetKey(name), KAFKA_OFFSETS)
    assert sum(recorded[topic].values()) == 300 and sorted(recorded[topic]) == [0, 1, 2]

    produce(topic, [(None, f"second-{i}") for i in range(120)])
    metadata = materialize_bridge(defs, name, instance)
    second = drain(subscription)
    assert sorted(m.data.decode() for m in second) == sorted(f"second-{i}" for i in range(120))
    assert metadata["records_read"].value == 120
    assert metadata["lag_remaining"].value == 0

    # Nothing new: a run moves nothing and keeps the offsets.
    metadata = materialize_bridge(defs, name, instance)
    assert drain(subscription) == []
    assert sum(recorded_position(instance, AssetKey(name), KAFKA_OFFSETS)[topic].values()) == 420


def test_batch_bound_splits_a_backlog_across_runs(stack, spark, tmp_path, unique):
    topic, name = f"backlog-{unique}", f"backlog_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch={"max_records": 150}))
    instance = DagsterInstance.ephemeral()
    produce(topic, [(str(i), f"v{i}") for i in range(400)])

    moved = []
    for expected_lag in (250, 100, 0):
        metadata = materialize_bridge(defs, name, instance)
        assert metadata["lag_remaining"].value == expected_lag
        moved.extend(m.data.decode() for m in drain(subscription))
    assert sorted(moved) == sorted(f"v{i}" for i in range(400))


def test_sensor_requests_a_run_only_when_there_is_lag(stack, spark, tmp_path, unique):
    topic, name = f"sensed-{unique}", f"sensed_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic))
    sensor = defs.resolve_sensor_def(f"{name}_lag_sensor")
    instance = DagsterInstance.ephemeral()
    resources = default_resources()

    def evaluate():
        with build_sensor_context(instance=instance, resources=resources) as context:
            return sensor(context)

    assert isinstance(evaluate(), SkipReason)
    produce(topic, [(None, "a"), (None, "b")])
    request = evaluate()
    assert isinstance(request, RunRequest) and request.tags["lag_at_request"] == "2"
    assert evaluate().run_key == request.run_key  # same state, same key: no second run
    materialize_bridge(defs, name, instance)
    assert isinstance(evaluate(), SkipReason)


def test_dagster_cli_materialize_moves_records_then_only_new_ones(stack, tmp_path, unique):
    """The documented path: `dagster asset materialize -m bridge_assets --select <bridge>`."""
    topic, name = f"cli-{unique}", f"cli_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    command, env = cli_run(tmp_path, sink_bridges_file(tmp_path, name, topic), name)

    produce(topic, [(None, f"a{i}") for i in range(50)])
    subprocess.run(command, env=env, check=True, capture_output=True)
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"a{i}" for i in range(50))

    produce(topic, [(None, f"b{i}") for i in range(7)])
    subprocess.run(command, env=env, check=True, capture_output=True)
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"b{i}" for i in range(7))


def test_first_run_starts_at_the_kafka_connect_groups_committed_offsets(stack, spark, tmp_path, unique):
    topic, name = f"handover-{unique}", f"handover_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    produce(topic, [(None, f"m{i}") for i in range(10)])
    # A Kafka Connect sink named like the bridge had committed up to offset 6.
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": f"connect-{name}"})
    consumer.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    consumer.close()

    defs = build_definitions(sink_bridges_file(tmp_path, name, topic))
    materialize_bridge(defs, name, DagsterInstance.ephemeral())
    assert sorted(m.data.decode() for m in drain(subscription)) == ["m6", "m7", "m8", "m9"]


def test_topics_regex_picks_up_new_topics_and_partitions(stack, spark, tmp_path, unique):
    first, second, name = f"rx-{unique}-a", f"rx-{unique}-b", f"rx_{unique}"
    admin = kafka_admin()
    admin.create_topic(first, partitions=1)
    subscription = create_pubsub_topic(f"rx-{unique}")
    bridges = sink_bridges_file(tmp_path, name, "unused", {"topics": None, "topics.regex": f"rx-{unique}-.*",
                                                          "cps.topic": f"rx-{unique}", "enableCompression": True,
                                                          "compressionBytesThreshold": 0})
    defs = build_definitions(bridges)
    instance = DagsterInstance.ephemeral()
    produce(first, [(None, f"a{i}") for i in range(5)])
    materialize_bridge(defs, name, instance)
    assert sorted(m.data.decode() for m in drain(subscription)) == [f"a{i}" for i in range(5)]

    admin.create_topic(second, partitions=1)
    raw_admin = AdminClient({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    raw_admin.create_partitions([NewPartitions(first, 2)])[first].result(30)
    produce(second, [(None, "b0"), (None, "b1")])
    produce_to_partition(first, 1, ["a-new-partition"])
    metadata = materialize_bridge(defs, name, instance)
    assert sorted(m.data.decode() for m in drain(subscription)) == ["a-new-partition", "b0", "b1"]
    assert set(metadata["kafka_offsets"].value) == {first, second}


def test_compressed_publish_requests_reach_the_emulator(stack, unique):
    subscription = create_pubsub_topic(f"gzip-{unique}")
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": PROJECT, "cps.topic": f"gzip-{unique}",
                                                   "enableCompression": True, "compressionBytesThreshold": 1000})
    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])
    acked = []
    publisher = RequestPublisher(connection.publish_channel(), f"projects/{PROJECT}/topics/gzip-{unique}",
                                 publish_settings(config), acked.extend, lambda *rejected: None)
    for origin, data in enumerate((b"z" * 2000, b"small")):
        publisher.add(PubsubMessage.pb()(data=data), len(data), origin)
        publisher.close(30)  # each message its own request: only the large one is over the threshold
    assert publisher.compressed_requests == 1 and acked == [0, 1]
    assert sorted(m.data for m in drain(subscription)) == [b"small", b"z" * 2000]


def test_properties_file_bridge_with_struct_values(stack, spark, tmp_path, unique):
    """An unchanged Kafka Connect file: JSON with schemas, a struct field as the body, headers."""
    topic, name = f"props-{unique}", f"props_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    (tmp_path / "cps-sink-connector.properties").write_text(
        "name=CPSSinkConnector\n"
        "connector.class=com.google.pubsub.kafka.sink.CloudPubSubSinkConnector\n"
        "tasks.max=10\n"
        f"topics={topic}\ncps.topic={topic}\ncps.project={PROJECT}\n"
        "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
        "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
        "messageBodyName=page\nheaders.publish=true\nmetadata.publish=true\n"
    )
    (tmp_path / "bridges.yaml").write_text(
        f"bridges:\n  - name: {name}\n    properties: cps-sink-connector.properties\n    mode: batch\n")
    schema = {"type": "struct", "fields": [{"field": "page", "type": "string"}, {"field": "dwell_ms", "type": "int64"}]}
    produce(topic, [("user-1", json.dumps({"schema": schema, "payload": {"page": "/home", "dwell_ms": 1200}}))],
            headers=[("source", b"test")])

    materialize_bridge(build_definitions(str(tmp_path / "bridges.yaml")), name, DagsterInstance.ephemeral())
    [message] = drain(subscription)
    assert message.data == b"/home"
    assert dict(message.attributes) == {
        "key": "user-1", "dwell_ms": "1200", "source": "test", "kafka.topic": topic, "kafka.partition": "0",
        "kafka.offset": "0", "kafka.timestamp": dict(message.attributes)["kafka.timestamp"],
    }
    assert int(message.attributes["kafka.timestamp"]) > 1_700_000_000_000


def test_topic_routing_sends_each_kafka_topic_to_its_own_pubsub_topic(stack, spark, tmp_path, unique):
    """cps.topic with ${topic}: one bridge, a topics.regex over two Kafka topics, two Pub/Sub topics."""
    topics = [f"routed-{unique}-{n}" for n in ("a", "b")]
    subscriptions = {}
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=2)
        subscriptions[topic] = create_pubsub_topic(f"cps-{topic}")
        produce(topic, [(None, f"{topic}-{i}") for i in range(20)])
    name = f"routed_{unique}"
    defs = build_definitions(sink_bridges_file(tmp_path, name, topics[0], {
        "topics": None, "topics.regex": f"routed-{unique}-.*", "cps.topic": "cps-${topic}"}))

    assert materialize_bridge(defs, name)["records_published"].value == 40
    for topic in topics:
        assert sorted(m.data.decode() for m in drain(subscriptions[topic])) == sorted(
            f"{topic}-{i}" for i in range(20))


def test_an_explicit_topic_map_sends_a_mapped_topic_to_its_target_and_the_others_to_their_own(
        stack, spark, tmp_path, unique):
    """topicNameMapping beside cps.topic=cps-${topic}: the mapped topic goes to the target the map names, the
    other to the Pub/Sub topic of its own name."""
    mapped, other = f"mapped-{unique}-a", f"mapped-{unique}-b"
    for topic in (mapped, other):
        kafka_admin().create_topic(topic, partitions=1)
        produce(topic, [(None, f"{topic}-{i}") for i in range(10)])
    subscriptions = {mapped: create_pubsub_topic(f"cps-orders-{unique}"), other: create_pubsub_topic(f"cps-{other}")}
    name = f"mapped_{unique}"
    defs = build_definitions(sink_bridges_file(tmp_path, name, f"{mapped},{other}", {
        "cps.topic": "cps-${topic}", "topicNameMapping": f"{mapped}:orders-{unique}"}))

    assert materialize_bridge(defs, name)["records_published"].value == 20
    for topic, subscription in subscriptions.items():
        assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"{topic}-{i}" for i in range(10))


def test_min_partitions_splits_one_partition_over_tasks(stack, spark, tmp_path, unique):
    topic, name = f"split-{unique}", f"split_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch={"min_partitions": 3}))
    instance = DagsterInstance.ephemeral()
    produce(topic, [(None, f"r-{i}") for i in range(3_000)])

    metadata = materialize_bridge(defs, name, instance)
    arrived = [m.data.decode() for m in drain(subscription)]
    assert sorted(arrived) == sorted(f"r-{i}" for i in range(3_000))  # each once, whatever task took it
    assert metadata["records_published"].value == 3_000
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {topic: {0: 3_000}}
