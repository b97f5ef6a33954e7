"""Bad records, dead letters and a run killed mid-batch: at-least-once, nothing lost."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from dagster import AssetKey, DagsterInstance, materialize
from google.cloud import pubsub_v1

from asset_metadata import recorded_position
from bridge_assets.definitions import build_definitions
from connectors.framework.plugin_parts import KAFKA_OFFSETS
from resources import default_resources
from tests.e2e.helpers import (
    cli_run, create_pubsub_topic, drain, kafka_admin, kill_run_midway, materialize_bridge, produce, sink_bridges_file,
)

pytestmark = pytest.mark.e2e


JSON_VALUES = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
               "value.converter.schemas.enable": False}


def _read_topic(topic: str, expected: int, timeout_s: float = 30):
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "test-reader",
                         "enable.auto.commit": False, "log_level": 3})
    partitions = kafka_admin().partitions([topic])[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records, deadline = [], time.monotonic() + timeout_s
    while len(records) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            records.append(message)
    consumer.close()
    return records


def test_bad_records_go_to_the_dead_letter_topic_and_the_batch_goes_on(stack, spark, tmp_path, unique):
    topic, dlq, name = f"dlq-src-{unique}", f"dlq-{unique}", f"dlq_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    kafka_admin().create_topic(dlq, partitions=1)
    subscription = create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **JSON_VALUES, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": True}))
    # With a dead-letter topic the sink reads the records' headers (headers.publish is off): a dead letter keeps them.
    produce(topic, [(None, '"good-1"'), (None, "{not json"), (None, '"good-2"'), (None, "nope"), (None, '"good-3"')],
            headers=[("trace", b"t-1")])

    metadata = materialize_bridge(defs, name)
    assert sorted(m.data for m in drain(subscription)) == [b"good-1", b"good-2", b"good-3"]
    assert metadata["records_dead_lettered"].value == 2 and metadata["records_published"].value == 3

    dead = _read_topic(dlq, 2)
    assert [m.value() for m in dead] == [b"{not json", b"nope"]
    headers = dict(dead[0].headers())
    assert headers["trace"] == b"t-1"
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.offset"] == b"1"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert b"not valid JSON" in headers["__connect.errors.exception.message"]


def test_a_poison_record_over_a_megabyte_is_dead_lettered_and_the_records_behind_it_move(
        stack, spark, tmp_path, unique):
    """The dead-letter topic is made (by the run) to take what the source topic can hold, and the
    producer sized to match: a 3 MB bad record no longer fails the run with MSG_SIZE_TOO_LARGE."""
    from confluent_kafka import Producer

    topic, dlq, name = f"big-src-{unique}", f"big-dlq-{unique}", f"big_dlq_{unique}"
    kafka_admin().create_topic(topic, partitions=1, config={"max.message.bytes": str(5 * 1024 * 1024)})
    subscription = create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **JSON_VALUES, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}))
    poison = b"{" + b"x" * (3 * 1024 * 1024)  # not JSON
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3,
                         "message.max.bytes": 6 * 1024 * 1024})
    for value in (b'"before"', poison, b'"after"'):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0

    metadata = materialize_bridge(defs, name)
    assert sorted(m.data for m in drain(subscription)) == [b"after", b"before"]
    assert metadata["records_dead_lettered"].value == 1
    (dead,) = _read_topic(dlq, 1)
    assert dead.value() == poison


def test_a_record_the_dead_letter_topic_refuses_too_is_named_and_skipped_under_tolerance_all(
        stack, spark, tmp_path, unique):
    """A compacted dead-letter topic refuses a record without a key: with errors.tolerance=all that record
    is counted and named in the run's metadata, and the records around it move; nothing is stuck."""
    topic, dlq, name = f"refuse-src-{unique}", f"refuse-dlq-{unique}", f"refuse_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    kafka_admin().create_topic(dlq, partitions=1, config={"cleanup.policy": "compact"})
    subscription = create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **JSON_VALUES, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}))
    produce(topic, [("a", '"good-1"'), ("b", "{keyed, not json"), (None, "{keyless, not json"), ("c", '"good-2"')])

    instance = DagsterInstance.ephemeral()
    metadata = materialize_bridge(defs, name, instance)
    assert sorted(m.data for m in drain(subscription)) == [b"good-1", b"good-2"]
    assert metadata["records_dead_lettered"].value == 1
    assert metadata["records_dead_letter_refused"].value == 1
    [refusal] = metadata["dead_letter_refusals"].value
    assert refusal.startswith(f"topic {topic} partition 0 offset 2: ")
    assert [m.value() for m in _read_topic(dlq, 1)] == [b"{keyed, not json"]
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {topic: {0: 4}}


def test_with_tolerance_none_a_bad_record_fails_the_run_and_records_nothing(stack, spark, tmp_path, unique):
    topic, name = f"strict-{unique}", f"strict_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, JSON_VALUES))
    produce(topic, [(None, '"ok"'), (None, "{bad")])
    instance = DagsterInstance.ephemeral()

    result = materialize([defs.get_assets_def(name)], resources=default_resources(), instance=instance,
                         raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert f"topic {topic} partition 0 offset 1" in str(failure.step_failure_data.error)
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {}


def test_a_run_killed_mid_batch_loses_nothing(stack, tmp_path, unique):
    topic, name = f"killed-{unique}", f"killed_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    command, env = cli_run(tmp_path, sink_bridges_file(tmp_path, name, topic, JSON_VALUES), name)
    expected = {f'"r{i}"'.encode() for i in range(60_000)}
    produce(topic, [(None, value) for value in expected])

    subscriber = pubsub_v1.SubscriberClient()
    received: list[bytes] = []

    def some_messages_arrived() -> bool:
        response = subscriber.pull(subscription=subscription, max_messages=1000, timeout=5)
        received.extend(m.message.data for m in response.received_messages)
        if response.received_messages:
            subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in response.received_messages])
        return bool(received)

    kill_run_midway(command, env, some_messages_arrived)
    assert 0 < len(received) < len(expected)

    # The killed run recorded nothing; the next run re-reads the whole range.
    again = subprocess.run(command, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    received += [m.data for m in drain(subscription)]
    assert set(received) == {v.strip(b'"') for v in expected}
