"""Every connector on each engine a deployment runs: runs in their own processes (as Dagster runs are)
moving exactly what is there, twice in a row.

Engines: "warm", the stack's Spark Connect server; "cluster", a classic session whose executors are
processes of a Spark standalone cluster's workers (BRIDGE_SPARK_MASTER=spark://...); "cluster-connect",
a Spark Connect server on that cluster reached through TLS with a bearer token, as a remote one is.
On the cluster every connector's code runs in executors' Python workers, separate from the run.

And a Spark executor killed on the standalone cluster, mid-batch (Spark runs its tasks again on another executor, the
run succeeds, and nothing is lost; what the dead executor published before it died comes again, at-least-once) and
under an always-on stream (the stream goes on in the same run from its last commit).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import pytest
import yaml
from google.cloud import pubsub_v1

from connectors.s3_block_gzip_sink.reader import read_from_offset
from tests.e2e.helpers import (
    PROJECT, cli_run, create_pubsub_topic, drain, kafka_admin, produce, sink_bridges_file,
)
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, lite_connection
from tests.e2e.test_continuous_e2e import KafkaReplica, recorded_position, start, wait_until
from tests.e2e.test_pubsublite_source_e2e import read_kafka
from tests.faults.test_run_faults import SLOW, Subscription, _bridge

pytestmark = pytest.mark.e2e


def run(tmp_path, bridges_file: str, name: str, engine: dict[str, str]) -> str:
    command, env = cli_run(tmp_path, bridges_file, name, engine)
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def _cluster_applications(stack) -> dict[str, list[dict]]:
    """The standalone master's view: its running and finished applications."""
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports()['spark_master_ui']}/json/", timeout=5) as r:
        state = json.load(r)
    return {"running": state["activeapps"], "finished": state["completedapps"]}


# A classic session on the cluster differs from cluster-connect only in where the driver runs (in the run's process);
# every connector's code runs in the cluster's executors under both. So the classic cluster session, the slowest to
# start (a Spark application per run: about a minute each), is run with one connector (the Cloud Pub/Sub sink), and
# every connector runs on the cluster through cluster-connect.
ENGINES = ["warm", "cluster-connect"]


@pytest.fixture(params=ENGINES)
def engine(request, stack, spark_remote):
    """The environment that sends a run to one engine; on the cluster, the master must have run it."""
    if request.param == "warm":
        yield {"BRIDGE_SPARK_REMOTE": spark_remote}
        return
    cluster = request.getfixturevalue("spark_cluster")
    before = _cluster_applications(stack)
    if request.param == "cluster":
        yield {"BRIDGE_SPARK_MASTER": cluster["BRIDGE_SPARK_CLUSTER_MASTER"]}
        # Each run was an application of its own; the master lists it as finished once its driver has
        # said goodbye, which may come a moment after the run's process exits.
        deadline = time.monotonic() + 30
        while not (finished := _cluster_applications(stack)["finished"][len(before["finished"]):]):
            assert time.monotonic() < deadline, "no application ran on the cluster"
            time.sleep(0.5)
        assert all(app["name"] == "kafka-pubsub-bridge" for app in finished)
    else:
        yield {name: cluster[name] for name in ("BRIDGE_SPARK_REMOTE", "BRIDGE_SPARK_REMOTE_TOKEN")}
        assert [app["name"] for app in _cluster_applications(stack)["running"]] == ["kafka-pubsub-bridge-engine"]


@pytest.mark.parametrize("engine", [*ENGINES, "cluster"], indirect=True)
def test_cloud_pubsub_sink(stack, engine, tmp_path, unique):
    topic, name = f"warm-sink-{unique}", f"warm_sink_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    bridges = sink_bridges_file(tmp_path, name, topic)
    produce(topic, [(f"k{i}", f"a-{i}") for i in range(200)])
    log = run(tmp_path, bridges, name, engine)
    assert "200 records read, 200 published" in log
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"a-{i}" for i in range(200))
    produce(topic, [(None, f"b-{i}") for i in range(50)])
    run(tmp_path, bridges, name, engine)
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"b-{i}" for i in range(50))


def test_cloud_pubsub_source(stack, engine, tmp_path, unique):
    name, kafka_topic = f"warm_source_{unique}", f"warm-source-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=2)
    publisher = pubsub_v1.PublisherClient()
    topic_path = publisher.topic_path(PROJECT, kafka_topic)
    subscription = create_pubsub_topic(kafka_topic)
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "CloudPubSubSourceConnector", "mode": "batch", "batch": {"parallelism": 1},
        "config": {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
                   "kafka.topic": kafka_topic}}]}))
    [f.result() for f in [publisher.publish(topic_path, f"m{i}".encode()) for i in range(100)]]
    run(tmp_path, str(path), name, engine)
    assert sorted(r.value().decode() for r in read_kafka(kafka_topic)) == sorted(f"m{i}" for i in range(100))


def test_s3_archive(stack, engine, tmp_path, unique):
    topic, name, bucket = f"warm-arch-{unique}", f"warm_arch_{unique}", f"warm-arch-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket=bucket)
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "S3BlockGzipSinkConnector", "config": {
        "topics": topic, "s3.bucket": bucket, "s3.prefix": "w", "s3.path_style": True,
        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}, "mode": "batch"}]}))
    produce(topic, [(None, f"line-{i}") for i in range(100)])
    run(tmp_path, str(path), name, engine)
    records = list(read_from_offset(s3, bucket, "w", topic, 0, 0))
    assert [(offset, line.decode()) for offset, line in records] == [(i, f"line-{i}") for i in range(100)]


def test_pubsublite_sink_and_source(stack, engine, tmp_path, unique):
    topic, sink_name, source_name = f"warm-lite-{unique}", f"warm_lite_sink_{unique}", f"warm_lite_src_{unique}"
    back = f"{topic}-back"
    kafka_admin().create_topic(topic, partitions=2)
    kafka_admin().create_topic(back, partitions=2)
    lite_topic, subscription = create_lite_topic(topic, partitions=2)
    produce(topic, [(f"k{i % 3}", f"v-{i}") for i in range(150)])
    run(tmp_path, lite_bridges_file(tmp_path, sink_name, "PubSubLiteSinkConnector",
                                    {"topics": topic, "pubsublite.topic": topic}), sink_name, engine)
    run(tmp_path, lite_bridges_file(tmp_path, source_name, "PubSubLiteSourceConnector",
                                    {"pubsublite.subscription": subscription.name, "kafka.topic": back}),
        source_name, engine)
    assert sorted(r.value().decode() for r in read_kafka(back)) == sorted(f"v-{i}" for i in range(150))
    cursors = lite_connection().cursor_service(subscription.location.region).list_partition_cursors(
        request={"parent": str(subscription)})
    assert sum(c.cursor.offset for c in cursors) == 150


def _python_worker_daemons(stack) -> int:
    """Python worker daemons of this suite's Spark Connect server whose parent is not a daemon: the server starts
    one per session. (Not the machine's: another engine on it, another suite's, starts its own.)"""
    from bench.process_memory import tree
    from connectors.spark_session import PYTHON_DAEMON_MODULE

    engine = {s.name: s.pid for s in stack.status()}["spark"]
    found = subprocess.run(["pgrep", "-f", "--", f"-m {PYTHON_DAEMON_MODULE}"], capture_output=True, text=True)
    daemons = set(found.stdout.split()) & {str(pid) for pid in tree(engine)}
    parents = {pid: open(f"/proc/{pid}/stat").read().split(") ")[1].split()[1] for pid in daemons
               if os.path.exists(f"/proc/{pid}/stat")}
    return sum(1 for parent in parents.values() if parent not in parents)


def test_runs_share_one_engine_session(stack, spark_remote, tmp_path, unique):
    """Runs of one Dagster instance join one Spark Connect session: no new Python worker daemon per
    run, and a session the server closed is replaced by a new one."""
    from dagster import DagsterInstance
    from pyspark.sql import SparkSession

    topic, name = f"warm-share-{unique}", f"warm_share_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    bridges = sink_bridges_file(tmp_path, name, topic)
    key = f"kafka-pubsub-bridge/spark-connect-session/{spark_remote}"

    def stored_session_id() -> str:
        with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
            return instance.run_storage.get_cursor_values({key})[key]

    produce(topic, [(None, "first")])
    run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    first_id, daemons = stored_session_id(), _python_worker_daemons(stack)
    assert daemons >= 1
    for text in ("second", "third"):
        produce(topic, [(None, text)])
        run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    assert stored_session_id() == first_id
    assert _python_worker_daemons(stack) == daemons

    try:
        SparkSession.builder.remote(f"{spark_remote}/;session_id={first_id}").create().stop()  # the server closes it
    finally:
        # A Spark Connect client marks its whole process as Connect mode; later tests here use a classic session.
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    produce(topic, [(None, "fourth")])
    run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    assert stored_session_id() != first_id
    assert sorted(m.data.decode() for m in drain(subscription)) == ["first", "fourth", "second", "third"]


def test_the_remote_engine_needs_its_token_and_never_shows_it(stack, spark_cluster, tmp_path, unique):
    topic, name = f"token-{unique}", f"token_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    bridges = sink_bridges_file(tmp_path, name, topic)
    produce(topic, [(None, "r1")])
    remote, token = spark_cluster["BRIDGE_SPARK_REMOTE"], spark_cluster["BRIDGE_SPARK_REMOTE_TOKEN"]

    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": remote,
                                                     "BRIDGE_SPARK_REMOTE_TOKEN": "not-the-token"})
    refused = subprocess.run(command, env=env, capture_output=True, text=True)
    assert refused.returncode != 0
    assert f"Spark Connect at {remote} refused the run's token" in refused.stderr
    assert "not-the-token" not in refused.stderr

    log = run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": remote, "BRIDGE_SPARK_REMOTE_TOKEN": token})
    assert [m.data.decode() for m in drain(subscription)] == ["r1"]
    assert token not in log
    stored = b"".join(path.read_bytes() for path in (tmp_path / "dagster_home").rglob("*") if path.is_file())
    assert token.encode() not in stored


# Faults on the cluster. In this file, with every other test that starts the cluster, so that one pytest-xdist
# worker starts it (a minute or more) and the other never does.

def _executors_of(stack_home: Path) -> list[int]:
    """Executor JVMs of this stack's cluster (their working folder is under its workers' folder)."""
    found = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True)
    pids = []
    for pid in map(int, found.stdout.split()):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(stack_home / "spark-cluster"):
                pids.append(pid)
        except OSError:
            continue
    return pids


@pytest.mark.faults
def test_an_executor_killed_mid_batch_loses_nothing(stack, spark_cluster, tmp_path, unique, fault_report):
    name, subscription, produced, bridges = _bridge(tmp_path, unique, 20_000, SLOW, partitions=4)
    engine = {key: spark_cluster[key] for key in ("BRIDGE_SPARK_REMOTE", "BRIDGE_SPARK_REMOTE_TOKEN")}
    command, env = cli_run(tmp_path, bridges, name, engine)
    arrived = Subscription(subscription)
    executors = _executors_of(stack.home)
    assert len(executors) == 2, "the cluster's Spark Connect server should hold one executor on each worker"

    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while arrived.pull_some() == 0:
        assert time.monotonic() < deadline and run.poll() is None, "the batch did not start"
    os.kill(executors[0], signal.SIGKILL)
    killed_at = time.monotonic()
    _, stderr = run.communicate(timeout=600)
    recovered_s = time.monotonic() - killed_at
    assert run.returncode == 0, stderr[-3000:]
    assert executors[0] not in _executors_of(stack.home)

    arrived.drain()
    row = fault_report.count("Spark executor killed -9 mid-batch (cluster, Spark Connect)", "CloudPubSubSink",
                             produced, arrived.received, recovered_s)
    assert row.lost == 0


@pytest.mark.faults
def test_the_executors_killed_under_an_always_on_stream_lose_nothing(stack, spark_cluster, tmp_path, unique):
    """A continuous Kafka -> Kafka bridge on the cluster, both executors killed -9 (its task's among them) while records
    keep coming: the workers start new executors, the stream goes on in the same run from its last commit, and
    everything arrives, at most what was sent around the kill twice."""
    case = KafkaReplica(unique, tmp_path)
    engine = {key: spark_cluster[key] for key in ("BRIDGE_SPARK_REMOTE", "BRIDGE_SPARK_REMOTE_TOKEN")}
    command, env = cli_run(tmp_path, case.bridges_file(), case.name, engine, always_on=True)
    run = start(command, env, tmp_path / "run.log")
    try:
        first = [f"a{i}" for i in range(50)]
        case.send(first)
        wait_until(lambda: set(first) <= set(case.arrived()), "the first records arrived", timeout_s=120)
        wait_until(lambda: recorded_position(env["DAGSTER_HOME"], case) == case.head(), "the position is recorded")

        during = [f"d{i}" for i in range(200)]
        sender = threading.Thread(target=lambda: [case.send(during[i:i + 10]) or time.sleep(0.05)
                                                  for i in range(0, len(during), 10)])
        sender.start()
        executors = _executors_of(stack.home)
        assert executors, "no executor of the cluster found"
        for pid in executors:
            os.kill(pid, signal.SIGKILL)
        sender.join()
        after = [f"b{i}" for i in range(50)]
        case.send(after)
        everything = first + during + after
        wait_until(lambda: set(everything) <= set(case.arrived()), "what was sent around and after the kill arrived",
                   timeout_s=240)
        wait_until(lambda: recorded_position(env["DAGSTER_HOME"], case) == case.head(), "the position is recorded")
        assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        assert not set(executors) & set(_executors_of(stack.home))
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
            run.wait(60)
    arrived = case.arrived()
    assert set(arrived) == set(everything)
    assert sum(n - 1 for n in collections.Counter(arrived).values()) <= len(during)
