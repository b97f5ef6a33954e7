"""`bridgectl bridges offsets NAME` as an operator runs it: the recorded position per partition beside where the
source starts and ends, from the bridge's Dagster instance and the source's admin APIs, before and after a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from tests.e2e.helpers import (
    PROJECT, cli_run, cloud_source_bridges_file, create_pubsub_topic, drain, interrupt, kafka_admin,
    produce_to_partition, sink_bridges_file, wait,
)
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, publish_lite, read_lite_partition

pytestmark = pytest.mark.e2e
BRIDGECTL = os.path.join(os.path.dirname(sys.executable), "bridgectl")


def offsets(env: dict[str, str], bridges: str, name: str, *options: str) -> subprocess.CompletedProcess:
    done = subprocess.run([BRIDGECTL, "bridges", "offsets", name, "--file", bridges, *options], env=env,
                          capture_output=True, text=True, timeout=120)
    # Dagster's own note on a DAGSTER_HOME without dagster.yaml (this test's), which a deployment's home has.
    done.stderr = "".join(line for line in done.stderr.splitlines(keepends=True)
                          if not line.startswith("No dagster instance configuration file"))
    return done


def offsets_json(env: dict[str, str], bridges: str, name: str) -> dict:
    done = offsets(env, bridges, name, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def by_partition(document: dict) -> dict[int, dict]:
    return {place["partition"]: place for place in document["places"]}


def kafka_values(topic: str) -> list[str]:
    """Every record of a one-partition topic, sorted."""
    end = kafka_admin().end_offsets({topic: [0]})[topic][0]
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "offsets-test",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + 60
    while len(values) < end and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    return sorted(values)


def materialize(command: list[str], env: dict[str, str]) -> None:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        # Once (under a loaded machine) a command here did not end, its run finished long before; what it printed
        # says whether it hung in the run or after it.
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"{' '.join(command[2:])} did not end within 300 s; the end of its stderr:\n{said[-3000:]}")
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_sink_shows_its_place_per_partition_before_and_after_a_run(stack, spark_remote, tmp_path, unique):
    topic, name = f"offs-{unique}", f"offs_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    create_pubsub_topic(topic)
    produce_to_partition(topic, 0, [f"a{i}" for i in range(7)])
    produce_to_partition(topic, 1, [f"b{i}" for i in range(3)])
    bridges = sink_bridges_file(tmp_path, name, topic)
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})

    before = offsets_json(env, bridges, name)
    assert before["recorded_at"] is None and before["run_id"] is None
    assert {p: (x["recorded"], x["next"], x["start"], x["end"], x["lag"]) for p, x in by_partition(before).items()} \
        == {0: (None, 0, 0, 7, 7), 1: (None, 0, 0, 3, 3)}
    assert before["lag"] == 10 and before["unit"] == "records"
    assert {x["source"] for x in before["places"]} == {topic}

    materialize(command, env)
    produce_to_partition(topic, 0, ["late"])
    after = offsets_json(env, bridges, name)
    assert {p: (x["recorded"], x["next"], x["end"], x["lag"]) for p, x in by_partition(after).items()} \
        == {0: (7, 7, 8, 1), 1: (3, 3, 3, 0)}
    assert after["lag"] == 1
    assert after["run_id"] and abs(after["recorded_at"] - time.time()) < 300

    table = offsets(env, bridges, name)
    assert table.returncode == 0, table.stderr
    assert f"by run {after['run_id']}" in table.stdout and "lag 1 records" in table.stdout
    assert topic in table.stdout


def test_the_lite_source_shows_its_cursors_and_the_cloud_source_says_who_keeps_its_place(stack, tmp_path, unique):
    topic_id, name = f"offs-lite-{unique}", f"offs_lite_{unique}"
    topic, subscription = create_lite_topic(topic_id, partitions=2)
    publish_lite(topic, [{"data": f"m{i}".encode(), "ordering_key": "k"} for i in range(4)])
    bridges = lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", {
        "pubsublite.subscription": subscription.name, "kafka.topic": f"from-lite-{unique}"})
    _, env = cli_run(tmp_path, bridges, name)
    document = offsets_json(env, bridges, name)
    assert document["unit"] == "messages" and document["lag"] == 4
    assert sorted((x["recorded"], x["next"], x["start"], x["end"]) for x in document["places"]) \
        == [(None, 0, 0, 0), (None, 0, 0, 4)]  # one ordering key: one partition
    assert {x["source"] for x in document["places"]} == {str(subscription)}

    cloud_dir = tmp_path / "cloud"
    cloud_dir.mkdir()
    pubsub_topic = f"offs-cps-{unique}"
    source = cloud_source_bridges_file(cloud_dir, "offs_cps", create_pubsub_topic(pubsub_topic), pubsub_topic)
    said = offsets(env, source, "offs_cps")
    assert said.returncode == 0, said.stderr
    assert "CloudPubSubSourceConnector keeps no position of its own" in said.stderr
    assert "a reset seeks the subscription" in said.stderr
    assert said.stdout == ""


def test_an_unknown_bridge_and_an_unreachable_source_each_get_one_line(stack, tmp_path, unique):
    topic, name = f"offs-bad-{unique}", f"offs_bad_{unique}"
    bridges = sink_bridges_file(tmp_path, name, topic)
    _, env = cli_run(tmp_path, bridges, name)

    unknown = offsets(env, bridges, "no_such_bridge")
    assert unknown.returncode == 1
    assert unknown.stderr.strip().splitlines() == [
        f"error: no bridge named 'no_such_bridge' in {bridges}; there are: {name}"]

    unreachable = offsets({**env, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9"}, bridges, name)
    assert unreachable.returncode == 1
    [line] = unreachable.stderr.strip().splitlines()
    assert line.startswith(f"error: bridge {name}: reading where its source starts and ends failed")


def reset(env: dict[str, str], bridges: str, name: str, *options: str) -> subprocess.CompletedProcess:
    return offsets(env, bridges, name, "--reset", *options)


def reset_moves(env: dict[str, str], bridges: str, name: str, *options: str) -> dict:
    done = reset(env, bridges, name, *options, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def arrived(subscription: str) -> list[str]:
    return sorted(m.data.decode() for m in drain(subscription))


def test_a_reset_to_a_time_replays_exactly_the_records_since_a_shift_skips_and_undo_puts_it_back(
        stack, spark_remote, tmp_path, unique):
    topic, name = f"reset-{unique}", f"reset_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    produce_to_partition(topic, 0, [f"old-{i}" for i in range(10)])
    time.sleep(1.5)
    since = datetime.now(timezone.utc).isoformat()
    time.sleep(0.5)
    produce_to_partition(topic, 0, [f"new-{i}" for i in range(10)])
    bridges = sink_bridges_file(tmp_path, name, topic)
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    materialize(command, env)
    assert len(arrived(subscription)) == 20

    dry = reset_moves(env, bridges, name, "--to-datetime", since)
    assert dry["executed"] is False and dry["moves"] == [
        {"source": topic, "partition": 0, "now": 20, "new": 10, "replays": 10, "skips": 0}]
    assert by_partition(offsets_json(env, bridges, name))[0]["recorded"] == 20  # a dry run changes nothing

    done = reset_moves(env, bridges, name, "--to-datetime", since, "--execute", "--reason", "a consumer lost data")
    assert done["executed"] is True and done["moves"][0]["new"] == 10
    shown = offsets_json(env, bridges, name)
    assert (by_partition(shown)[0]["recorded"], shown["lag"], shown["run_id"]) == (10, 10, done["run_id"])
    materialize(command, env)
    assert arrived(subscription) == sorted(f"new-{i}" for i in range(10))

    produce_to_partition(topic, 0, [f"late-{i}" for i in range(6)])
    refused = reset(env, bridges, name, "--shift-by", "9", "--execute")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"error: {topic}:0: offset 29 is outside what the source keeps (0..26); --clamp moves it to the nearest; "
        f"nothing was changed"]
    assert reset_moves(env, bridges, name, "--shift-by", "9", "--clamp")["moves"][0]["new"] == 26  # to the end
    assert reset_moves(env, bridges, name, "--shift-by", "2", "--execute")["moves"][0]["skips"] == 2
    materialize(command, env)
    assert arrived(subscription) == [f"late-{i}" for i in range(2, 6)]

    undone = reset_moves(env, bridges, name, "--undo", "--execute")
    assert undone["moves"] == [{"source": topic, "partition": 0, "now": 26, "new": 20, "replays": 6, "skips": 0}]
    materialize(command, env)
    assert arrived(subscription) == [f"late-{i}" for i in range(6)]


def test_a_running_bridge_refuses_a_reset_and_a_seek_that_cannot_bring_acked_messages_back_says_so(
        stack, spark_remote, tmp_path, unique):
    topic, name = f"reset-run-{unique}", f"reset_run_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    produce_to_partition(topic, 0, ["first"])
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "CloudPubSubSinkConnector", "mode": "continuous", "continuous": {"host": None},
        "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic,
                   "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}]}))
    command, env = cli_run(tmp_path, str(bridges), name, {"BRIDGE_SPARK_REMOTE": spark_remote}, always_on=True)
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        received: list[str] = []
        wait(lambda: bool(received.extend(arrived(subscription)) or received) or run.poll() is not None,
             "the always-on run delivered")
        assert run.poll() is None
        refused = reset(env, str(bridges), name, "--to-earliest", "--execute")
        assert refused.returncode == 1
        [line] = refused.stderr.strip().splitlines()
        assert line.startswith(f"error: bridge {name} is running (run ") and "stop it first" in line \
            and "nothing was changed" in line
        dry = reset(env, str(bridges), name, "--to-earliest")
        assert dry.returncode == 0 and "holds it now" in dry.stderr
    finally:
        interrupt(run)

    cloud_dir = tmp_path / "cloud"
    cloud_dir.mkdir()
    source = cloud_source_bridges_file(cloud_dir, "reset_cps", create_pubsub_topic(f"reset-cps-{unique}"), topic)
    dry = reset(env, source, "reset_cps", "--to-earliest")
    assert dry.returncode == 0, dry.stderr
    warning, plan = dry.stderr.strip().splitlines()
    assert warning.startswith("warning: ") and "does not retain acked messages" in warning
    assert plan.startswith(f"dry run: nothing changed (it would seek projects/{PROJECT}/subscriptions/reset-cps-")


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


def lite_committed(subscription) -> dict[int, int]:
    from tests.e2e.lite_helpers import lite_connection

    client = lite_connection().cursor_service(subscription.location.region)
    return {c.partition: c.cursor.offset for c in client.list_partition_cursors(request={"parent": str(subscription)})}


def test_the_lite_sink_the_archive_and_the_kafka_sink_each_replay_exactly_the_records_since_a_time(
        stack, spark_remote, tmp_path, unique):
    import gzip

    import boto3

    topic = f"reset-sinks-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    lite_topic, lite_subscription = create_lite_topic(topic, partitions=1)
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket=topic)
    strings = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}  # the Kafka sink copies bytes
    sinks = {
        f"lite_{unique}": ("PubSubLiteSinkConnector", {**strings, "pubsublite.project": lite_topic.project,
                                                       "pubsublite.location": str(lite_topic.location),
                                                       "pubsublite.topic": topic}),
        f"arch_{unique}": ("S3BlockGzipSinkConnector", {**strings, "s3.bucket": topic, "s3.prefix": "arch",
                                                        "s3.path_style": True}),
        f"repl_{unique}": ("KafkaSinkConnector", {"target.bootstrap.servers":
                                                  os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]}),
    }
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [
        {"name": name, "connector": connector, "mode": "batch", "config": {"topics": topic, **keys}}
        for name, (connector, keys) in sinks.items()]}))
    produce_to_partition(topic, 0, [f"old-{i}" for i in range(10)])
    time.sleep(1.5)
    since = datetime.now(timezone.utc).isoformat()
    time.sleep(0.5)
    produce_to_partition(topic, 0, [f"new-{i}" for i in range(10)])
    names = ",".join(sinks)
    command, env = cli_run(tmp_path, str(bridges), names, {"BRIDGE_SPARK_REMOTE": spark_remote})
    materialize(command, env)

    for name in sinks:
        done = reset_moves(env, str(bridges), name, "--to-datetime", since, "--execute")
        assert done["moves"] == [{"source": topic, "partition": 0, "now": 20, "new": 10, "replays": 10, "skips": 0}]
    materialize(command, env)

    once, twice = [f"old-{i}" for i in range(10)], [f"new-{i}" for i in range(10)] * 2
    lite = read_lite_partition(lite_subscription, 0, 30)
    assert sorted(m.message.data.decode() for m in lite) == sorted(once + twice)
    replicated = Consumer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], "group.id": "offs",
                           "log_level": 3})
    replicated.assign([TopicPartition(topic, 0, 0)])
    values = [m.value().decode() for m in replicated.consume(100, timeout=10) if m.error() is None]
    replicated.close()
    assert sorted(values) == sorted(once + twice)
    # The archive wrote the replayed range again as a file of its own, starting at offset 10, and its cursor moved.
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=topic)["Contents"] if o["Key"].endswith(".gz"))
    assert [key.rsplit("-", 1)[1] for key in keys] == ["000000000000.gz", "000000000010.gz"]
    replay = gzip.decompress(s3.get_object(Bucket=topic, Key=keys[1])["Body"].read()).decode().splitlines()
    assert replay == [f"new-{i}" for i in range(10)]
    cursor = json.loads(s3.get_object(Bucket=topic, Key=f"arch/cursors/{topic}-00000.json")["Body"].read())
    assert cursor["next_offset"] == 20


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
    assert snapshot.startswith(f"projects/{PROJECT}/snapshots/{name}-before-reset-")
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
