"""Positions of the sources, and of every connector under exactly once: the Lite source's cursors reset by offset,
time and to the oldest message (its subscription's cursors with them), the Cloud Pub/Sub source's subscription
seeked to a time and back to the snapshot taken before, and resets that stay exactly once."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone

import pytest
import yaml

from tests.e2e.helpers import PROJECT, cli_run, cloud_source_bridges_file, kafka_admin, produce_to_partition
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, lite_committed, publish_lite
from tests.e2e.offsets_helpers import kafka_values, materialize, reset, reset_moves

pytestmark = pytest.mark.e2e


def test_the_lite_source_is_reset_to_an_offset_and_a_time_and_its_subscription_cursor_moves_with_it(
        stack, spark_remote, tmp_path, unique):
    topic_id, name, kafka_topic = f"reset-lite-{unique}", f"reset_lite_{unique}", f"from-reset-lite-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    topic, subscription = create_lite_topic(topic_id, partitions=1)
    publish_lite(topic, [{"data": f"m{i}".encode()} for i in range(6)])
    time.sleep(1.5)
    since = datetime.now(timezone.utc).isoformat()
    time.sleep(0.5)
    publish_lite(topic, [{"data": f"n{i}".encode()} for i in range(3)])
    everything = [f"m{i}" for i in range(6)] + [f"n{i}" for i in range(3)]
    bridges = lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", {
        "pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic})
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    materialize(command, env)
    assert kafka_values(kafka_topic) == sorted(everything)

    done = reset_moves(env, bridges, name, "--to-offset", "0=2", "--execute")
    assert done["moves"] == [{"source": str(subscription), "partition": 0, "now": 9, "new": 2, "replays": 7,
                              "skips": 0}]
    assert lite_committed(subscription) == {0: 2}  # the subscription's own cursor moved with the position
    materialize(command, env)
    replayed = everything + everything[2:]
    assert kafka_values(kafka_topic) == sorted(replayed)

    assert reset_moves(env, bridges, name, "--to-datetime", since, "--execute")["moves"][0]["new"] == 6
    materialize(command, env)
    replayed += [f"n{i}" for i in range(3)]  # exactly the messages published since
    assert kafka_values(kafka_topic) == sorted(replayed)

    assert reset_moves(env, bridges, name, "--to-earliest")["moves"][0]["new"] == 0  # the oldest message kept


def test_the_cloud_source_seeks_its_subscription_to_a_time_and_undo_seeks_to_the_snapshot_taken_before(
        stack, spark_remote, tmp_path, unique):
    from google.cloud import pubsub_v1

    name, kafka_topic = f"seek_cps_{unique}", f"from-seek-cps-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(PROJECT, f"seek-cps-{unique}")
    publisher.create_topic(name=topic)
    subscription = subscriber.subscription_path(PROJECT, f"seek-cps-{unique}-sub")
    subscriber.create_subscription(request={"name": subscription, "topic": topic, "retain_acked_messages": True})

    def publish(values: list[str]) -> None:
        for future in [publisher.publish(topic, value.encode()) for value in values]:
            future.result(30)

    publish([f"old-{i}" for i in range(5)])
    time.sleep(1.5)
    since = datetime.now(timezone.utc).isoformat()
    time.sleep(0.5)
    publish([f"new-{i}" for i in range(5)])
    bridges = cloud_source_bridges_file(tmp_path, name, subscription, kafka_topic)
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    materialize(command, env)
    delivered = [f"old-{i}" for i in range(5)] + [f"new-{i}" for i in range(5)]
    assert kafka_values(kafka_topic) == sorted(delivered)

    refused = reset(env, bridges, name, "--shift-by", "3", "--execute")
    assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
        "error: --shift-by: Pub/Sub has no offsets: a Cloud Pub/Sub source seeks to --to-datetime, --by-duration, "
        "--to-latest, --to-earliest, --to-snapshot or --undo; nothing was changed"]
    dry = reset_moves(env, bridges, name, "--to-datetime", since)
    assert dry["executed"] is False and dry["seek"]["subscription"] == subscription
    assert dry["seek"]["to_time_ms"] == int(datetime.fromisoformat(since).timestamp() * 1000)

    seek = reset_moves(env, bridges, name, "--to-datetime", since, "--execute", "--reason", "bad deploy")["seek"]
    snapshot = seek["snapshot_first"]
    assert snapshot.startswith(f"projects/{PROJECT}/snapshots/before-reset-{name}-")
    undo = reset_moves(env, bridges, name, "--undo", "--execute")["seek"]
    assert undo["to_snapshot"] == snapshot  # before any run: the replay is undone, nothing moves
    materialize(command, env)
    assert kafka_values(kafka_topic) == sorted(delivered)

    redo = reset_moves(env, bridges, name, "--undo", "--execute")["seek"]  # an undo of the undo
    assert redo["to_snapshot"] == undo["snapshot_first"]
    materialize(command, env)
    delivered += [f"new-{i}" for i in range(5)]  # exactly the messages published since
    assert kafka_values(kafka_topic) == sorted(delivered)


def test_under_exactly_once_a_reset_moves_the_positions_in_the_transactions_too(
        stack, spark_remote, tmp_path, unique):
    """A run resumes from its transactions where they are ahead of the recorded position, and the Cloud source takes a
    message whose id its transactions hold pending for one delivered already: a reset that left them would replay
    nothing. The Lite source and the Kafka sink replay from offset 2, the Cloud source from a time, each exactly once
    more (read_committed)."""
    from confluent_kafka import Producer
    from google.cloud import pubsub_v1

    from tests.e2e.helpers import read_committed

    lite_kafka_topic, source_topic, cps_kafka_topic = (f"eos-reset-lite-{unique}", f"eos-reset-{unique}",
                                                       f"eos-reset-cps-{unique}")
    for topic in (lite_kafka_topic, source_topic, cps_kafka_topic):
        kafka_admin().create_topic(topic, partitions=1)
    lite_topic, subscription = create_lite_topic(f"eos-reset-{unique}", partitions=1)
    publish_lite(lite_topic, [{"data": f"m{i}".encode()} for i in range(6)])
    produce_to_partition(source_topic, 0, [f"v{i}" for i in range(6)])
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    pubsub_topic = publisher.topic_path(PROJECT, f"eos-reset-{unique}")
    publisher.create_topic(name=pubsub_topic)
    cps_subscription, peek = (subscriber.subscription_path(PROJECT, f"eos-reset-{unique}-{kind}")
                              for kind in ("sub", "peek"))
    for path in (cps_subscription, peek):
        subscriber.create_subscription(request={"name": path, "topic": pubsub_topic, "retain_acked_messages": True})
    for future in [publisher.publish(pubsub_topic, f"old-{i}".encode()) for i in range(3)]:
        future.result(30)
    time.sleep(1.5)
    since = datetime.now(timezone.utc).isoformat()
    time.sleep(0.5)
    for future in [publisher.publish(pubsub_topic, f"new-{i}".encode()) for i in range(3)]:
        future.result(30)
    required = {"exactly.once.support": "required"}
    names = {"lite": f"lite_{unique}", "repl": f"repl_{unique}", "cps": f"cps_{unique}"}
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [
        {"name": names["lite"], "connector": "PubSubLiteSourceConnector", "mode": "batch", "config": {
            "pubsublite.project": subscription.project, "pubsublite.location": str(subscription.location),
            "pubsublite.subscription": subscription.name, "kafka.topic": lite_kafka_topic, **required}},
        {"name": names["repl"], "connector": "KafkaSinkConnector", "mode": "batch", "config": {
            "topics": source_topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
            **required}},
        {"name": names["cps"], "connector": "CloudPubSubSourceConnector", "mode": "batch", "batch": {"parallelism": 1},
         "config": {"cps.project": PROJECT, "cps.subscription": cps_subscription.rsplit("/", 1)[1],
                    "kafka.topic": cps_kafka_topic, "cps.streamingPull.enabled": False, **required}}]}))
    command, env = cli_run(tmp_path, str(bridges), ",".join(names.values()), {"BRIDGE_SPARK_REMOTE": spark_remote})
    materialize(command, env)

    for name in (names["lite"], names["repl"]):
        moves = reset_moves(env, str(bridges), name, "--to-offset", "0=2", "--execute")["moves"]
        assert [(m["now"], m["new"]) for m in moves] == [(6, 2)]
    # As after a commit whose acks were lost: the slot's record holds the new messages' ids pending.
    new_ids = {m.message.message_id: 1 for m in subscriber.pull(subscription=peek, max_messages=10, timeout=10)
               .received_messages if m.message.data.startswith(b"new-")}
    assert len(new_ids) == 3
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    producer.produce(f"bridge-offsets.{names['cps']}", partition=0,
                     key=f"projects/{PROJECT}/subscriptions/eos-reset-{unique}-sub#0".encode(),
                     value=json.dumps({"pending": new_ids, "released": {}}).encode())
    producer.flush(10)
    assert reset_moves(env, str(bridges), names["cps"], "--to-datetime", since, "--execute")["executed"] is True
    materialize(command, env)

    def values(bootstrap: str, topic: str) -> list[str]:
        return [m.value().decode() for m in read_committed(bootstrap, topic, 1)]

    assert values(os.environ["KAFKA_BOOTSTRAP_SERVERS"], lite_kafka_topic) == \
        [f"m{i}" for i in range(6)] + [f"m{i}" for i in range(2, 6)]
    assert values(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], source_topic) == \
        [f"v{i}" for i in range(6)] + [f"v{i}" for i in range(2, 6)]
    assert sorted(values(os.environ["KAFKA_BOOTSTRAP_SERVERS"], cps_kafka_topic)) == \
        sorted([f"old-{i}" for i in range(3)] + [f"new-{i}" for i in range(3)] * 2)
