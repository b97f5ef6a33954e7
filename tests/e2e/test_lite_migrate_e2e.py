"""`bridgectl lite migrate` as a user runs it, against the local Lite server and Kafka: a topic's retained messages
and its subscriptions' places move to Kafka, through a kill -9, new messages, a retention gap and a group that has
consumers. Kafka's copy is checked record by record through its `lite.offset` headers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer

from tests.e2e.helpers import kafka_admin
from tests.e2e.lite_helpers import create_lite_topic, lite_connection, publish_lite
from tests.e2e.migrate_helpers import BRIDGECTL, add_subscription, heads, migrate, table_row

pytestmark = pytest.mark.e2e
def copied_lite_offsets(kafka_topic: str, partitions: int) -> dict[int, list[int]]:
    """Each Kafka partition's records' Lite offsets, in Kafka's order."""
    admin = kafka_admin()
    ends = admin.end_offsets({kafka_topic: list(range(partitions))})[kafka_topic]
    return {p: [int(dict(headers)["lite.offset"]) for headers in _headers(kafka_topic, p, ends[p])]
            for p in range(partitions)}


def _headers(topic: str, partition: int, end: int) -> list:
    from confluent_kafka import TopicPartition

    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list = []
    deadline = time.monotonic() + 60
    while len(out) < end and time.monotonic() < deadline:
        out += [m.headers() for m in consumer.consume(1000, 0.5) if m.error() is None]
    consumer.close()
    return out


def read_as_group(kafka_topic: str, group: str, expected: int) -> list[tuple[int, int]]:
    """(partition, Lite offset) of what a consumer of `group` reads from its committed offsets: once it has its
    partitions, until `expected` records came and then a second more."""
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    consumer.subscribe([kafka_topic])
    got: list[tuple[int, int]] = []
    deadline, quiet_until = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        messages = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
        got += [(m.partition(), int(dict(m.headers())["lite.offset"])) for m in messages]
        if len(got) >= expected and consumer.assignment():
            quiet_until = quiet_until or time.monotonic() + 1.0
            if time.monotonic() > quiet_until:
                break
    consumer.close()
    return got


def kill_when_copying(args: list[str], kafka_topic: str) -> int:
    """Starts the migration and kills it -9 as soon as Kafka holds some of the copy; how many records it held."""
    run = subprocess.Popen([BRIDGECTL, "lite", "migrate", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    admin = kafka_admin()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        partitions = admin.partitions([kafka_topic]).get(kafka_topic)
        if partitions and sum(admin.end_offsets({kafka_topic: partitions})[kafka_topic].values()) > 0:
            break
        time.sleep(0.01)
    assert run.poll() is None, "the migration finished before it could be killed"
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    partitions = admin.partitions([kafka_topic])[kafka_topic]
    return sum(admin.end_offsets({kafka_topic: partitions})[kafka_topic].values())


def test_a_topic_and_two_subscriptions_move_through_a_kill_and_again_with_new_messages(stack, unique):
    topic, first = create_lite_topic(f"migrate-{unique}", partitions=3)
    kafka_topic = f"migrated-{unique}"
    publish_lite(topic, [{"data": os.urandom(1000).hex().encode(), "ordering_key": f"key-{i % 101}",
                          "attributes": {"n": str(i)}} for i in range(10_000)])
    at = heads(topic, 3)
    service = lite_connection().cursor_service(topic.location.region)
    cursors = {0: at[0] // 3, 1: at[1] // 2, 2: 0}
    for partition, offset in cursors.items():
        service.commit_cursor(request={"subscription": str(first), "partition": partition, "cursor": {"offset": offset}})
    at_head = add_subscription(topic, f"migrate-{unique}-at-head", at)
    args = ["--topic", str(topic), "--kafka-topic", kafka_topic]

    plan = migrate(*args, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    for p in range(3):  # partition, copy from Lite offset, Lite head, to copy: every message is still to copy
        assert table_row(p, 0, f"{at[p]:,}", f"{at[p]:,}").search(plan.stdout), plan.stdout
    assert first.name in plan.stdout and at_head.name in plan.stdout
    assert kafka_admin().partitions([kafka_topic]) == {}  # a dry run creates nothing

    held = kill_when_copying(args, kafka_topic)
    assert 0 < held < 10_000, held
    done = migrate(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "holds every message" in done.stderr
    assert migrate(*args, "--verify").returncode == 0

    # Each Kafka partition holds its Lite partition whole, in order, once: nothing lost or copied twice by the kill.
    assert copied_lite_offsets(kafka_topic, 3) == {p: list(range(at[p])) for p in range(3)}
    # Each group reads exactly what its subscription had not acknowledged.
    unread = sum(at[p] - cursors[p] for p in range(3))
    assert sorted(read_as_group(kafka_topic, first.name, unread)) == sorted(
        (p, o) for p in range(3) for o in range(cursors[p], at[p]))
    assert read_as_group(kafka_topic, at_head.name, 0) == []

    # New messages: a re-run copies only them, and the group at the head reads only them.
    publish_lite(topic, [{"data": f"late-{i}".encode(), "ordering_key": f"key-{i}"} for i in range(500)])
    later = heads(topic, 3)
    again = migrate(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "copied 500 messages" in again.stderr
    assert copied_lite_offsets(kafka_topic, 3) == {p: list(range(later[p])) for p in range(3)}
    assert sorted(read_as_group(kafka_topic, at_head.name, 500)) == sorted(
        (p, o) for p in range(3) for o in range(at[p], later[p]))


def test_a_retention_gap_and_a_cursor_behind_it(stack, unique):
    # 1 KiB messages in a partition that keeps about 100 KiB: the oldest are gone before the migration.
    topic, subscription = create_lite_topic(f"migrate-gap-{unique}", partitions=1, per_partition_bytes=100_000)
    kafka_topic = f"migrated-gap-{unique}"
    publish_lite(topic, [{"data": b"%04d" % i + b"x" * 1020} for i in range(300)])
    time.sleep(2.5)  # the Lite server's retention runs every second
    args = ["--topic", str(topic), "--kafka-topic", kafka_topic]

    done = migrate(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    [offsets] = copied_lite_offsets(kafka_topic, 1).values()
    assert 0 < offsets[0] and offsets == list(range(offsets[0], 300))  # from the first message Lite still held
    # The subscription's cursor (0) is behind the gap: its group starts at the first copied message.
    assert sorted(read_as_group(kafka_topic, subscription.name, len(offsets))) == [(0, o) for o in offsets]

    # Lite drops more of what was copied (60 KiB more in 100 KiB); the next run copies only what is new, and the
    # copy still verifies over what both sides hold.
    publish_lite(topic, [{"data": b"%04d" % i + b"y" * 1020} for i in range(300, 360)])
    time.sleep(2.5)
    again = migrate(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "copied 60 messages" in again.stderr
    assert table_row(0, f"{360 - offsets[0]:,}").search(again.stdout), again.stdout  # Kafka holds them all
    [offsets_after] = copied_lite_offsets(kafka_topic, 1).values()
    assert offsets_after == list(range(offsets[0], 360))


def test_a_group_with_consumers_is_not_touched(stack, unique):
    topic, subscription = create_lite_topic(f"migrate-busy-{unique}", partitions=1)
    kafka_topic = f"migrated-busy-{unique}"
    publish_lite(topic, [{"data": f"m{i}".encode()} for i in range(20)])
    kafka_admin().create_topic(kafka_topic, partitions=1)
    member = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": subscription.name,
                       "session.timeout.ms": 30_000})
    member.subscribe([kafka_topic])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        result = migrate("--topic", str(topic), "--kafka-topic", kafka_topic)
    finally:
        member.close()
    assert "not touched: 1 consumers are in the group on Kafka" in result.stderr
    assert result.returncode == 1  # the group is not at its subscription's place: the verification says so
    assert kafka_admin().committed_offsets(subscription.name, {kafka_topic: [0]}) == {}


def test_bad_input_is_named_and_changes_nothing(stack, unique):
    topic, _ = create_lite_topic(f"migrate-bad-{unique}", partitions=2)
    kafka_topic = f"migrated-bad-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=3)
    wrong_partitions = migrate("--topic", str(topic), "--kafka-topic", kafka_topic)
    assert wrong_partitions.returncode != 0
    assert f"Kafka topic {kafka_topic} has 3 partitions and Lite topic {topic} 2" in wrong_partitions.stderr
    bad_key = migrate("--topic", str(topic), "--kafka-topic", f"other-{unique}", "--set", "sasl.mechanism=GSSAPI",
                      "--set", "sasl.password=hunter2-secret")
    assert bad_key.returncode != 0 and "sasl.mechanism" in bad_key.stderr
    assert "hunter2-secret" not in bad_key.stderr + bad_key.stdout
    unknown = migrate("--topic", str(topic), "--kafka-topic", f"other-{unique}", "--subscription", "nope")
    assert unknown.returncode != 0 and "not subscriptions of Lite topic" in unknown.stderr
    missing = migrate("--topic", str(topic).replace(topic.name, f"missing-{unique}"), "--kafka-topic", kafka_topic)
    assert missing.returncode != 0 and "NotFound" in missing.stderr and "Traceback" not in missing.stderr
    assert kafka_admin().partitions([f"other-{unique}"]) == {}


def test_the_migration_as_a_dagster_job(stack, tmp_path, unique):
    from dagster import AssetKey, DagsterEventType, DagsterInstance

    from bridge_assets.definitions import build_definitions
    from connectors import endpoints

    topic, subscription = create_lite_topic(f"migrate-job-{unique}", partitions=2)
    kafka_topic = f"migrated-job-{unique}"
    publish_lite(topic, [{"data": f"m{i}".encode(), "ordering_key": f"k{i}"} for i in range(400)])
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text("bridges: []\n")
    job = build_definitions(str(bridges)).get_job_def("lite_migration")
    run_config = {"ops": {"migrate_lite_topic": {"config": {"topic": str(topic), "kafka_topic": kafka_topic}}}}

    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(run_config=run_config, instance=instance)
        assert result.success
        [materialized] = [e for e in result.all_node_events if e.event_type == DagsterEventType.STEP_OUTPUT]
        metadata = materialized.step_output_data.metadata
        assert metadata["copied"].value == 400
        assert {row.data["matches"] for row in metadata["verification"].value.records} == {"yes"}
        assert [row.data["group"] for row in metadata["group_verification"].value.records] == [subscription.name] * 2
        observed = instance.fetch_observations(AssetKey(endpoints.kafka_topic(kafka_topic).key), limit=10).records
        assert observed[0].asset_observation.metadata["lite_migration_copied"].value == 400

        # Published after the copy and not copied: verify-only fails the run and names why.
        publish_lite(topic, [{"data": b"late"}])
        verify = {"ops": {"migrate_lite_topic": {"config": {**run_config["ops"]["migrate_lite_topic"]["config"],
                                                              "verify_only": True}}}}
        failed = job.execute_in_process(run_config=verify, instance=instance, raise_on_error=False)
        assert not failed.success
        [failure] = [e for e in failed.all_node_events if e.event_type == DagsterEventType.STEP_FAILURE]
        assert "do not all match" in failure.step_failure_data.error.message


def test_one_migration_writes_a_kafka_topic_at_a_time(stack, unique):
    from connectors.pubsublite_migration.lease import LAPSE_S, CopyLease, MigrationRunning

    topic = f"migrate-lease-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    config = {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]}
    with CopyLease(config, topic):  # a migration at work: the second waits a lapse, then is refused
        with pytest.raises(MigrationRunning, match=f"another migration is writing Kafka topic {topic}"):
            with CopyLease(config, topic):
                pass
    with CopyLease(config, topic):  # released at its end: the next one need not wait
        pass

    # A migration killed -9 while it holds the lease: the next one waits for the lease to lapse, then goes on.
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom connectors.pubsublite_migration.lease import CopyLease\n"
        f"with CopyLease({config!r}, {topic!r}):\n    print('held', flush=True)\n    time.sleep(120)\n")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    started = time.monotonic()
    with CopyLease(config, topic):
        waited = time.monotonic() - started
    assert 1 < waited < LAPSE_S + 3


def test_a_kafka_broker_restarted_mid_copy_loses_nothing_and_copies_nothing_twice(stack, unique):
    topic, _ = create_lite_topic(f"migrate-restart-{unique}", partitions=3)
    kafka_topic = f"migrated-restart-{unique}"
    publish_lite(topic, [{"data": os.urandom(1000).hex().encode()} for _ in range(30_000)])
    at = heads(topic, 3)
    args = ["--topic", str(topic), "--kafka-topic", kafka_topic]
    run = subprocess.Popen([BRIDGECTL, "lite", "migrate", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    admin, deadline = kafka_admin(), time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        partitions = admin.partitions([kafka_topic]).get(kafka_topic)
        if partitions and sum(admin.end_offsets({kafka_topic: partitions})[kafka_topic].values()) > 0:
            break
        time.sleep(0.01)
    assert run.poll() is None, "the copy finished before the broker could be stopped"
    stack.down(only=("kafka",), log=lambda line: None)
    try:
        time.sleep(2)
    finally:
        stack.up(only=("kafka",), log=lambda line: None)
    _, stderr = run.communicate(timeout=300)
    # The idempotent producer rides over the restart, or the run ends in one line and the next goes on.
    assert run.returncode in (0, 1) and "Traceback" not in stderr, stderr[-3000:]
    done = migrate(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert copied_lite_offsets(kafka_topic, 3) == {p: list(range(at[p])) for p in range(3)}
