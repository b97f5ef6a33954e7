"""`bridgectl bridges offsets NAME` as an operator runs it: the recorded position per partition beside where the
source starts and ends, from the bridge's Dagster instance and the source's admin APIs, before and after a run; the
sinks' resets (the sources' are in test_source_offsets_e2e.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timezone

import pytest
import yaml

from tests.e2e.helpers import (
    PROJECT, cli_run, cloud_source_bridges_file, create_pubsub_topic, interrupt, kafka_admin, produce_to_partition,
    read_committed, sink_bridges_file, wait,
)
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, publish_lite, read_lite_partition
from tests.e2e.offsets_helpers import arrived, by_partition, materialize, offsets, offsets_json, reset, reset_moves

pytestmark = pytest.mark.e2e


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


def test_the_lite_kafka_kinesis_pulsar_and_archive_sinks_each_replay_exactly_the_records_since_a_time(
        stack, spark_remote, tmp_path, unique):
    import gzip

    import boto3
    import pulsar

    from tests.e2e.helpers import create_kinesis_stream, kinesis_records_by_shard

    topic = f"reset-sinks-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    lite_topic, lite_subscription = create_lite_topic(topic, partitions=1)
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket=topic)
    create_kinesis_stream(topic, 1)
    strings = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}  # the Kafka sink copies bytes
    sinks = {
        f"lite_{unique}": ("PubSubLiteSinkConnector", {**strings, "pubsublite.project": lite_topic.project,
                                                       "pubsublite.location": str(lite_topic.location),
                                                       "pubsublite.topic": topic}),
        f"arch_{unique}": ("S3BlockGzipSinkConnector", {**strings, "s3.bucket": topic, "s3.prefix": "arch",
                                                        "s3.path_style": True}),
        f"repl_{unique}": ("KafkaSinkConnector", {"target.bootstrap.servers":
                                                  os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]}),
        f"kin_{unique}": ("KinesisSinkConnector", {"kinesis.stream.name": topic}),
        f"pls_{unique}": ("PulsarSinkConnector", {"pulsar.service.url": os.environ["PULSAR_SERVICE_URL"]}),
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
    values = [m.value().decode() for m in read_committed(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], topic, 1)]
    assert sorted(values) == sorted(once + twice)
    # The archive wrote the replayed range again as a file of its own, starting at offset 10, and its cursor moved.
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=topic)["Contents"] if o["Key"].endswith(".gz"))
    assert [key.rsplit("-", 1)[1] for key in keys] == ["000000000000.gz", "000000000010.gz"]
    replay = gzip.decompress(s3.get_object(Bucket=topic, Key=keys[1])["Body"].read()).decode().splitlines()
    assert replay == [f"new-{i}" for i in range(10)]
    cursor = json.loads(s3.get_object(Bucket=topic, Key=f"arch/cursors/{topic}-00000.json")["Body"].read())
    assert cursor["next_offset"] == 20
    [kinesis] = kinesis_records_by_shard(topic).values()
    assert sorted(record["Data"].decode() for record in kinesis) == sorted(once + twice)
    client = pulsar.Client(os.environ["PULSAR_SERVICE_URL"])
    try:
        consumer = client.subscribe(f"persistent://public/default/{topic}", "offsets-check",
                                    initial_position=pulsar.InitialPosition.Earliest)
        received = [consumer.receive(timeout_millis=20_000).data().decode() for _ in range(30)]
    finally:
        client.close()
    assert sorted(received) == sorted(once + twice)

