"""Small clients for tests: produce to Kafka, create and drain Pub/Sub subscriptions."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable

import boto3
import yaml

from confluent_kafka import Producer
from google.cloud import pubsub_v1

from local_stack.child_signals import hear_sigint
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import KafkaConnection

PROJECT = "test-project"


def kafka_admin() -> KafkaAdmin:
    return KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))


def produce(topic: str, records: list[tuple[bytes | str | None, bytes | str | None]], headers=None) -> None:
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for key, value in records:
        try:
            producer.produce(topic, key=key, value=value, headers=headers)
        except BufferError:  # the local queue is full (100k messages): let it drain
            producer.flush(30)
            producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0


def mm2_checkpoints(messages: list) -> dict[tuple[str, str, int], tuple[int, int, int]]:
    """MirrorMaker 2 checkpoint records, read as (group, topic, partition) -> (version, upstream, downstream); the
    last one of each key wins, as in the compacted topic."""
    checkpoints = {}
    for message in messages:
        key, value = message.key(), message.value()
        glen = struct.unpack_from(">h", key, 0)[0]
        tlen = struct.unpack_from(">h", key, 2 + glen)[0]
        where = (key[2:2 + glen].decode(), key[4 + glen:4 + glen + tlen].decode(),
                 struct.unpack_from(">i", key, 4 + glen + tlen)[0])
        checkpoints[where] = struct.unpack_from(">hqq", value, 0)
    return checkpoints


def produce_to_partition(topic: str, partition: int, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def create_pubsub_topic(topic: str) -> str:
    """Create a topic with one subscription; return the subscription path."""
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic_path = publisher.topic_path(PROJECT, topic)
    publisher.create_topic(name=topic_path)
    subscription = subscriber.subscription_path(PROJECT, f"{topic}-sub")
    subscriber.create_subscription(name=subscription, topic=topic_path)
    return subscription


def drain(subscription: str) -> list[pubsub_v1.types.PubsubMessage]:
    """Pull and ack everything the subscription holds now."""
    subscriber = pubsub_v1.SubscriberClient()
    messages = []
    while True:
        response = subscriber.pull(subscription=subscription, max_messages=1000, timeout=10)
        if not response.received_messages:
            return messages
        messages.extend(m.message for m in response.received_messages)
        subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in response.received_messages])


def sink_bridges_file(directory: Path, name: str, topic: str, keys: dict | None = None,
                      batch: dict | None = None, checks: dict | None = None) -> str:
    """A bridges file with one CloudPubSubSinkConnector bridge from Kafka `topic` to the Pub/Sub topic of
    the same name; `keys` add or override connector keys."""
    config = {"topics": topic, "cps.project": PROJECT, "cps.topic": topic,
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.storage.StringConverter", **(keys or {})}
    config = {k: v for k, v in config.items() if v is not None}  # None removes a key
    entry = {"name": name, "connector": "CloudPubSubSinkConnector", "mode": "batch", "config": config}
    if batch:
        entry["batch"] = batch
    if checks:
        entry["checks"] = checks
    path = directory / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [entry]}))
    return str(path)


def cloud_source_bridges_file(directory: Path, name: str, subscription: str, kafka_topic: str,
                              keys: dict | None = None, batch: dict | None = None,
                              continuous: dict | None = None) -> str:
    """A bridges file with one CloudPubSubSourceConnector bridge from `subscription` (a path) to `kafka_topic`, in
    micro-batch mode unless `continuous` settings are given."""
    config = {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
              "kafka.topic": kafka_topic, **(keys or {})}
    entry = {"name": name, "connector": "CloudPubSubSourceConnector", "mode": "continuous" if continuous else "batch",
             "config": config}
    if batch:
        entry["batch"] = batch
    if continuous:
        entry["continuous"] = continuous
    path = directory / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [entry]}))
    return str(path)


def publish_pubsub_messages(topic: str, messages: list[tuple[bytes, dict]]) -> None:
    """Publishes (data, attributes) pairs to the Pub/Sub topic of that name and waits for every id."""
    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=1000, max_latency=0.05))
    path = publisher.topic_path(PROJECT, topic)
    futures = [publisher.publish(path, data, **attributes) for data, attributes in messages]
    for future in futures:
        future.result(60)


def materialize_bridge(defs, name: str, instance=None) -> dict:
    """One in-process materialization of a bridge with the default resources; its metadata."""
    from dagster import DagsterInstance, materialize

    from resources import default_resources

    result = materialize([defs.get_assets_def(name)], resources=default_resources(),
                         instance=instance or DagsterInstance.ephemeral())
    assert result.success
    return result.asset_materializations_for_node(name)[0].metadata


def cli_run(tmp_path: Path, bridges_file: str, name: str, engine: dict[str, str] | None = None,
            always_on: bool = False) -> tuple[list[str], dict[str, str]]:
    """The documented command line, `dagster asset materialize -m bridge_assets --select <name>` (one batch), or
    with `always_on` `dagster job execute -m bridge_assets -j <name>_job` (a continuous bridge kept moving from a
    shell), with its environment: this bridges file and a Dagster instance of its own; `engine` is the
    environment that picks the Spark engine (none: a classic local session in the run)."""
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir(exist_ok=True)
    env = {**os.environ, "BRIDGES_FILE": bridges_file, "DAGSTER_HOME": str(dagster_home), **(engine or {})}
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    if always_on:
        return [dagster, "job", "execute", "-m", "bridge_assets", "-j", f"{name}_job"], env
    return [dagster, "asset", "materialize", "-m", "bridge_assets", "--select", name], env


def kill_run_midway(command: list[str], env: dict[str, str], started: Callable[[], bool],
                    timeout_s: float = 120, before_kill: Callable[[], None] | None = None) -> None:
    """Start a run and SIGKILL its whole process group (Dagster, Spark's JVM and workers) as soon as
    `started()` says it is part-way through; fail if it finished first. `before_kill` runs just before."""
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and run.poll() is None and not started():
        time.sleep(0.2)
    assert run.poll() is None, "the run finished before it could be killed mid-batch"
    if before_kill is not None:
        before_kill()
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()


def interrupt(run: subprocess.Popen, timeout_s: float = 60) -> None:
    """Ctrl-C for a run started in its own process group (a running one ends after recording its commits); killed
    if it has not ended within `timeout_s`."""
    if run.poll() is not None:
        return
    os.killpg(run.pid, signal.SIGINT)
    try:
        run.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait(condition: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.5)


def answers(url: str) -> bool:
    """Whether a Dagster webserver answers at `url`."""
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=2):
            return True
    except OSError:
        return False


class DagsterDev:
    """`dagster dev` (webserver and daemon) on a bridges file, in its own process group and Dagster home (the
    project's dagster.yaml), as a user runs it; `bridgectl(...)` runs `bridgectl bridges ...` against it."""

    def __init__(self, tmp_path: Path, bridges: Path, spark_remote: str, env: dict[str, str] | None = None):
        from local_stack.paths import PROJECT_ROOT

        self.home = tmp_path / "dagster_home"
        self.home.mkdir()
        shutil.copy(PROJECT_ROOT / "dagster_home" / "dagster.yaml", self.home / "dagster.yaml")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = tmp_path / "dev.log"
        self.env = {**os.environ, "BRIDGES_FILE": str(bridges), "DAGSTER_HOME": str(self.home),
                    "BRIDGE_SPARK_REMOTE": spark_remote, "DAGSTER_URL": self.url, **(env or {})}
        self._bin = Path(sys.executable).parent
        self._process = subprocess.Popen(
            [str(self._bin / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT_ROOT, env=self.env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=hear_sigint)

    def __enter__(self) -> "DagsterDev":
        try:
            wait(lambda: answers(self.url), "dagster dev answers")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self._process.pid, signal.SIGINT)
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)

    def bridgectl(self, *args: str, stdout_only: bool = False) -> str:
        done = subprocess.run([str(self._bin / "bridgectl"), "bridges", *args], env=self.env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout if stdout_only else done.stdout + done.stderr  # --json goes to stdout alone


def kinesis_client():
    # moto's GetRecords iterates a shard's records while a PutRecords from another request thread adds to them, and
    # answers 500 ("OrderedDict mutated during iteration") when they meet: a reader beside a running sink retries.
    from botocore.config import Config

    return boto3.client("kinesis", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        config=Config(retries={"max_attempts": 10, "mode": "standard"}))


def create_kinesis_stream(name: str, shards: int) -> None:
    client = kinesis_client()
    client.create_stream(StreamName=name, ShardCount=shards)
    deadline = time.monotonic() + 30
    while client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        assert time.monotonic() < deadline, f"stream {name} never became ACTIVE"
        time.sleep(0.2)


def kinesis_records_by_shard(stream: str) -> dict[str, list[dict]]:
    client, found = kinesis_client(), {}
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = []
        while True:
            page = client.get_records(ShardIterator=iterator, Limit=10_000)
            records += page["Records"]
            if not page["Records"] or page.get("MillisBehindLatest", 0) == 0 and not page.get("NextShardIterator"):
                break
            iterator = page["NextShardIterator"]
        found[shard["ShardId"]] = records
    return found


def read_committed(bootstrap_servers: str, topic: str, partitions: int, quiet_s: float = 2.0) -> list:
    """Every record a read_committed consumer of `topic` sees (Kafka messages, in each partition's order), read
    until nothing more came for `quiet_s`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "eos-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < quiet_s:
        batch = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
        if batch:
            records += batch
            quiet_since = time.monotonic()
    consumer.close()
    return records
