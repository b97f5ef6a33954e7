"""`bridgectl bridges ...` against a running deployment (`dagster dev`: webserver and daemon) as a user runs it:
a Kafka -> Kinesis bridge added from the command line moves data under its own sensor, is stopped and started,
reports its stats and status; a Kafka -> Kafka bridge added from a .properties file copies the topic; both are
removed, without editing YAML."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import boto3
import pytest
import yaml

from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import KafkaConnection
from tests.e2e.helpers import DagsterDev, kafka_admin, produce, wait

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


def _stream_records(stream: str) -> int:
    client = boto3.client("kinesis", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    total = 0
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        total += len(client.get_records(ShardIterator=iterator, Limit=10_000)["Records"])
    return total


def _target_records(topic: str) -> int:
    admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]))
    partitions = admin.partitions([topic])
    return sum(admin.end_offsets(partitions)[topic].values()) if partitions else 0


def test_a_bridge_added_from_the_command_line_runs_stops_starts_reports_and_is_removed(
        stack, spark_remote, tmp_path, unique):
    topic, stream, name, replica = f"adm-{unique}", f"adm-{unique}", f"adm_{unique}", f"adm_copy_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    boto3.client("kinesis", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                 region_name="us-east-1").create_stream(StreamName=stream, ShardCount=1)
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text("# bridges of this test\nbridges:\n")
    dev = DagsterDev(tmp_path, bridges, spark_remote)
    bridgectl = dev.bridgectl

    def one_row(command: str) -> dict:
        [row] = json.loads(bridgectl(command, name, "--json", stdout_only=True))
        return row

    def stats() -> dict:
        return one_row("stats")

    with dev:
        added = bridgectl("add", name, "--mode", "batch", "--connector", "KinesisSinkConnector",
                          "--set", f"topics={topic}",
                          "--set", f"kinesis.stream.name={stream}", "--interval", "2")
        assert f"sensor {name}_lag_sensor running" in added
        assert yaml.safe_load(bridges.read_text())["bridges"][0]["name"] == name
        assert "# bridges of this test" in bridges.read_text()

        produce(topic, [(f"k{i}", f"v{i}") for i in range(50)])
        wait(lambda: _stream_records(stream) == 50, "the sensor's run moved the records to Kinesis")
        wait(lambda: stats()["delivered"] == 50, "the stats count the delivered records")
        row = stats()
        assert row["read"] == 50 and row["rejected"] == 0 and row["last_run"]["status"] == "SUCCESS"

        assert "stopped" in bridgectl("stop", name)
        wait(lambda: stats()["last_run"]["status"] in ("SUCCESS", "FAILURE", "CANCELED"), "no run in flight")
        produce(topic, [("late", "late")])
        time.sleep(8)  # four sensor intervals: a running sensor would have started a run by now
        assert _stream_records(stream) == 50
        assert "running" in bridgectl("start", name)
        wait(lambda: _stream_records(stream) == 51, "the started sensor moved the late record")

        status = one_row("status")
        assert status["sensor"] == "RUNNING" and status["last_error"] is None

        # A Kafka -> Kafka bridge from an unchanged connector .properties file, beside the first one.
        properties = tmp_path / "replica.properties"
        properties.write_text(f"name={replica}\nconnector.class=KafkaSinkConnector\ntopics={topic}\n"
                              f"target.bootstrap.servers={os.environ['KAFKA_TARGET_BOOTSTRAP_SERVERS']}\n"
                              "topic.rename.format=copy.${topic}\n")
        assert f"sensor {replica}_lag_sensor running" in bridgectl("add", replica, "--mode", "batch",
                                                                   "--properties", str(properties),
                                                                   "--interval", "2")
        wait(lambda: _target_records(f"copy.{topic}") == 51, "the replica bridge copied the topic")
        assert f"removed {replica}" in bridgectl("remove", replica)

        assert f"removed {name}" in bridgectl("remove", name)
        assert name not in bridgectl("list")
        assert yaml.safe_load(bridges.read_text())["bridges"] in (None, [])
