"""`bridgectl lite migrate --to pubsub` as a user runs it, against the local Lite server and pstest: a topic's
retained messages go to a Pub/Sub topic and each Lite subscription becomes a Pub/Sub subscription that gets exactly
what it had not acknowledged, through a kill -9 and new messages. Subscribers read the subscriptions back."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from google.cloud import pubsub_v1
from google.cloud.pubsublite.types import SubscriptionPath

from tests.e2e.helpers import PROJECT
from tests.e2e.lite_helpers import create_lite_topic, lite_connection, publish_lite
from tests.e2e.migrate_helpers import BRIDGECTL, add_subscription, heads, migrate, table_row

pytestmark = pytest.mark.e2e


def received(subscription: str, quiet_s: float = 2.0) -> list[tuple[int, int, str]]:
    """(Lite partition, Lite offset, ordering key) of every message a subscriber of `subscription` gets, acked as
    read, until nothing came for `quiet_s`."""
    subscriber = pubsub_v1.SubscriberClient()
    got: list[tuple[int, int, str]] = []
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < quiet_s:
        messages = subscriber.pull(subscription=subscription, max_messages=1000, timeout=10).received_messages
        if messages:
            quiet_since = time.monotonic()
            got += [(int(m.message.attributes["lite.partition"]), int(m.message.attributes["lite.offset"]),
                     m.message.ordering_key) for m in messages]
            subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in messages])
    return got


def position(topic, name: str) -> int:
    """How many messages the copy's position (its own Lite subscription) says were published."""
    service = lite_connection().cursor_service(topic.location.region)
    path = str(SubscriptionPath(topic.project, topic.location, name))
    try:
        return sum(c.cursor.offset for c in service.list_partition_cursors(request={"parent": path}))
    except Exception:  # not created yet
        return 0


def kill_when_copying(args: list[str], topic, position_name: str) -> int:
    """Starts the migration and kills it -9 once its position says some messages are published."""
    run = subprocess.Popen([BRIDGECTL, "lite", "migrate", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None and position(topic, position_name) == 0:
        time.sleep(0.01)
    assert run.poll() is None, "the migration finished before it could be killed"
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    return position(topic, position_name)


def test_a_topic_and_two_subscriptions_move_to_pubsub_through_a_kill_and_again_with_new_messages(stack, unique):
    topic, first = create_lite_topic(f"to-pubsub-{unique}", partitions=3)
    pubsub_topic = f"projects/{PROJECT}/topics/from-lite-{unique}"
    publish_lite(topic, [{"data": os.urandom(1000).hex().encode(), "ordering_key": f"key-{i % 101}",
                          "attributes": {"n": str(i)}} for i in range(20_000)])
    at = heads(topic, 3)
    cursors = {0: at[0] // 3, 1: at[1] // 2, 2: 0}
    service = lite_connection().cursor_service(topic.location.region)
    for partition, offset in cursors.items():
        service.commit_cursor(request={"subscription": str(first), "partition": partition, "cursor": {"offset": offset}})
    at_head = add_subscription(topic, f"to-pubsub-{unique}-at-head", at)
    args = ["--topic", str(topic), "--to", "pubsub", "--pubsub-topic", pubsub_topic]

    plan = migrate(*args, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    for p in range(3):  # partition, copy from Lite offset, Lite head, to copy
        assert table_row(p, 0, f"{at[p]:,}", f"{at[p]:,}").search(plan.stdout), plan.stdout
    with pytest.raises(Exception, match="NotFound|404"):  # a dry run creates nothing
        pubsub_v1.PublisherClient().get_topic(topic=pubsub_topic)

    held = kill_when_copying(args, topic, f"bridgectl-migrate-{topic.name}-to-from-lite-{unique}")
    assert 0 < held < 20_000, held
    done = migrate(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "holds every message" in done.stderr
    assert migrate(*args, "--verify").returncode == 0  # the verification hands back what it read

    # Each Pub/Sub subscription gets what its Lite subscription had not acknowledged, every message at least once;
    # copies only from what the kill left published past the position's last commit.
    got = received(f"projects/{PROJECT}/subscriptions/{first.name}")
    expected = {(p, o) for p in range(3) for o in range(cursors[p], at[p])}
    assert {(p, o) for p, o, _ in got} == expected
    assert len(got) - len(expected) < 20_000 - held
    assert all(key.startswith("key-") for _, _, key in got)  # the Lite key is the ordering key
    assert received(f"projects/{PROJECT}/subscriptions/{at_head.name}", quiet_s=1.0) == []

    # New messages: a re-run publishes only them, and both subscriptions get them.
    publish_lite(topic, [{"data": b"new-%d" % i} for i in range(500)])
    later = heads(topic, 3)
    again = migrate(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "published 500 messages" in again.stderr
    new = {(p, o) for p in range(3) for o in range(at[p], later[p])}
    assert {(p, o) for p, o, _ in received(f"projects/{PROJECT}/subscriptions/{first.name}")} == new
    assert {(p, o) for p, o, _ in received(f"projects/{PROJECT}/subscriptions/{at_head.name}")} == new


def test_what_pubsub_cannot_carry_is_refused_by_name(stack, unique):
    topic, first = create_lite_topic(f"to-pubsub-bad-{unique}", partitions=1)
    publish_lite(topic, [{"data": b"x%d" % i} for i in range(10)])
    pubsub_topic = f"projects/{PROJECT}/topics/from-lite-bad-{unique}"
    args = ["--topic", str(topic), "--to", "pubsub", "--pubsub-topic", pubsub_topic]

    no_topic = migrate("--topic", str(topic), "--to", "pubsub")
    assert no_topic.returncode == 2 and "--pubsub-topic" in no_topic.stderr
    bad_path = migrate("--topic", str(topic), "--to", "pubsub", "--pubsub-topic", "from-lite")
    assert bad_path.returncode == 2 and "not a Pub/Sub topic path" in bad_path.stderr

    # A Pub/Sub subscription of that name with another filter is not used.
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    publisher.create_topic(name=pubsub_topic)
    taken = f"projects/{PROJECT}/subscriptions/{first.name}"
    subscriber.create_subscription(request={"name": taken, "topic": pubsub_topic})
    clash = migrate(*args)
    assert clash.returncode == 2 and f"{taken} exists with filter ''" in clash.stderr, clash.stderr
    subscriber.delete_subscription(subscription=taken)

    assert migrate(*args).returncode == 0
    # A Lite subscription added after the copy began would miss what was copied: refused, nothing published.
    add_subscription(topic, f"to-pubsub-bad-{unique}-late", {0: 0})
    late = migrate(*args)
    assert late.returncode == 2 and "does not exist, and this migration has already copied" in late.stderr, late.stderr


def test_the_migration_to_pubsub_as_a_dagster_job(stack, tmp_path, unique):
    from dagster import AssetKey, DagsterEventType, DagsterInstance

    from bridge_assets.definitions import build_definitions
    from connectors import endpoints

    topic, subscription = create_lite_topic(f"to-pubsub-job-{unique}", partitions=2)
    publish_lite(topic, [{"data": f"m{i}".encode(), "ordering_key": f"k{i}"} for i in range(400)])
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text("bridges: []\n")
    job = build_definitions(str(bridges)).get_job_def("lite_migration")
    config = {"topic": str(topic), "to": "pubsub", "pubsub_topic": f"projects/{PROJECT}/topics/job-{unique}"}

    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(run_config={"ops": {"migrate_lite_topic": {"config": config}}},
                                        instance=instance)
        assert result.success
        [output] = [e for e in result.all_node_events if e.event_type == DagsterEventType.STEP_OUTPUT]
        metadata = output.step_output_data.metadata
        assert metadata["copied"].value == 400
        assert {row.data["matches"] for row in metadata["verification"].value.records} == {"yes"}
        assert {row.data["matches"] for row in metadata["subscription_verification"].value.records} == {"yes"}
        observed = instance.fetch_observations(AssetKey(endpoints.pubsub_topic(PROJECT, f"job-{unique}").key),
                                               limit=10).records
        assert observed[0].asset_observation.metadata["lite_migration_copied"].value == 400
    assert len(received(f"projects/{PROJECT}/subscriptions/{subscription.name}")) == 400

    wrong = job.execute_in_process(run_config={"ops": {"migrate_lite_topic": {"config": {
        "topic": str(topic), "to": "pubsub"}}}}, raise_on_error=False)
    [failure] = [e for e in wrong.all_node_events if e.event_type == DagsterEventType.STEP_FAILURE]
    assert "to: pubsub needs pubsub_topic" in str(failure.step_failure_data.error), failure.step_failure_data.error
