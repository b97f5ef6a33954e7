"""Outages: a system the bridge needs stops answering; the run fails within a bound, in one line
naming it, records nothing, and the run after the outage moves everything once."""

from __future__ import annotations

import os
import time

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from asset_metadata import recorded_position
from bridge_assets.definitions import build_definitions
from connectors.framework.plugin_parts import KAFKA_OFFSETS
from resources import default_resources
from tests.e2e.helpers import (
    cloud_source_bridges_file, create_pubsub_topic, drain, kafka_admin, produce, publish_pubsub_messages,
    sink_bridges_file,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def _materialize(defs, name: str, instance: DagsterInstance):
    return materialize([defs.get_assets_def(name)], resources=default_resources(), instance=instance,
                       raise_on_error=False)


def _fails_in_one_line_with_kafka_down(stack, defs, name: str, instance: DagsterInstance, doing: str) -> float:
    """Materializes `name` with the Kafka broker stopped (started again after): the run fails within 30 s in one
    line naming Kafka and what it was `doing`. Returns when Kafka went down (monotonic)."""
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    stack.down(only=("kafka",), log=lambda line: None)
    down_at = time.monotonic()
    try:
        result = _materialize(defs, name, instance)
        failed_after_s = time.monotonic() - down_at
    finally:
        stack.up(only=("kafka",), log=lambda line: None)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
    assert f"Kafka at {bootstrap} did not answer while {doing}" in failure.message
    assert failure.message.count("\n") == 1
    assert failure.cause is None  # the one line, without a client trace behind it
    assert failed_after_s < 30
    return down_at


def test_kafka_down_fails_the_run_in_one_line_and_the_next_run_moves_everything(
        stack, spark, tmp_path, unique, fault_report):
    topic, name = f"outage-{unique}", f"outage_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    produced = {f"o{i}" for i in range(2_000)}
    produce(topic, [(None, value) for value in sorted(produced)])
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch={"outage_timeout_seconds": 10}))
    instance = DagsterInstance.ephemeral()

    down_at = _fails_in_one_line_with_kafka_down(stack, defs, name, instance, f"planning the batch of {topic}")
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {}

    assert _materialize(defs, name, instance).success
    row = fault_report.count("Kafka broker stopped, then restarted", "CloudPubSubSink", produced,
                             [m.data.decode() for m in drain(subscription)], time.monotonic() - down_at)
    assert row.lost == 0 and row.duplicated == 0


def test_kafka_down_fails_a_source_run_in_one_line_and_the_next_run_moves_everything(stack, spark, tmp_path, unique):
    from tests.e2e.test_cloud_pubsub_source_e2e import _consume_all

    topic, name = f"source-outage-{unique}", f"source_outage_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    sent = [f"s{i}".encode() for i in range(500)]
    publish_pubsub_messages(topic, [(data, {}) for data in sent])
    defs = build_definitions(cloud_source_bridges_file(tmp_path, name, subscription, topic,
                                                       batch={"outage_timeout_seconds": 10}))
    instance = DagsterInstance.ephemeral()

    _fails_in_one_line_with_kafka_down(stack, defs, name, instance, f"checking kafka.topic {topic}")

    assert _materialize(defs, name, instance).success  # nothing was pulled: the subscription still holds it all
    assert sorted(m.value() for m in _consume_all(topic, len(sent), timeout_s=30)) == sorted(sent)


def test_kafka_down_while_a_source_writes_fails_the_run_within_its_outage_timeout(stack, spark, tmp_path, unique):
    """The source's producer gives up on a record within the bridge's outage timeout (librdkafka's own default
    waits 5 minutes), and the run after the outage moves everything."""
    import threading

    from tests.e2e.test_cloud_pubsub_source_e2e import _consume_all
    from tests.faults.eos_faults import written_to

    topic, name = f"source-outage-write-{unique}", f"source_outage_write_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    sent = [f"w{i}".encode() for i in range(60_000)]
    publish_pubsub_messages(topic, [(data, {}) for data in sent])
    defs = build_definitions(cloud_source_bridges_file(tmp_path, name, subscription, topic,
                                                       batch={"outage_timeout_seconds": 5, "max_records": 60_000}))
    instance = DagsterInstance.ephemeral()
    results = []
    run = threading.Thread(target=lambda: results.append(_materialize(defs, name, instance)))
    run.start()
    deadline = time.monotonic() + 120
    while written_to(topic) == 0 and run.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.is_alive(), "the run ended before Kafka could be stopped under it"
    stack.down(only=("kafka",), log=lambda line: None)
    down_at = time.monotonic()
    try:
        run.join(timeout=120)
        failed_after_s = time.monotonic() - down_at
    finally:
        stack.up(only=("kafka",), log=lambda line: None)
    assert not run.is_alive() and not results[0].success
    failure = next(e for e in results[0].all_events if e.is_step_failure).step_failure_data.error
    assert f"Kafka topic {topic} did not accept" in failure.message
    # The producer's 5 s, the Spark job's end, the lease's stop (bounded: stream_lease.STOP_WAIT_S); it was minutes.
    assert failed_after_s < 20, f"the run failed {failed_after_s:.0f} s after Kafka stopped"

    assert _materialize(defs, name, instance).success
    arrived = {m.value() for m in _consume_all(topic, len(sent), timeout_s=60)}
    assert arrived == set(sent)  # nothing lost (what the failed run wrote may arrive twice: at least once)


def test_the_sensor_backs_off_a_bridge_whose_kafka_does_not_answer(stack, tmp_path, unique):
    import json
    import socket

    from dagster import SkipReason, build_sensor_context

    from resources import KafkaResource

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    name = f"backoff_{unique}"
    defs = build_definitions(sink_bridges_file(tmp_path, name, f"backoff-{unique}"))
    sensor = defs.resolve_sensor_def(f"{name}_lag_sensor")
    instance = DagsterInstance.ephemeral()
    resources = {**default_resources(), "kafka": KafkaResource(bootstrap_servers=dead)}

    def evaluate(cursor: str | None):
        with build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
            return sensor(context), context.cursor

    first, cursor = evaluate(None)
    assert isinstance(first, SkipReason) and "next check in 30 s (1 failed in a row)" in first.skip_message
    started = time.monotonic()
    waiting, _ = evaluate(cursor)
    assert "backing off" in waiting.skip_message and time.monotonic() - started < 5  # Kafka is not asked
    state = json.loads(cursor)
    second, cursor = evaluate(json.dumps({**state, "retry_at": 0}))  # the wait is over
    assert "next check in 60 s (2 failed in a row)" in second.skip_message
