"""The always-on streams (continuous mode) on the warm engine, as a user runs them: a partition added while they
run, their task's Python worker killed (a task lost); for the Kafka sinks, their commits in the Kafka Connect group
and the Kafka -> Kafka sink's MirrorMaker 2 checkpoints."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import javaproperties
import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions
from dagster import AssetKey, DagsterInstance

from bench.process_memory import children
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import KafkaConnection
from connectors.framework.delivered import DeliveredCommit
from tests.e2e.test_continuous_e2e import CONTINUOUS, CloudSink, KafkaReplica, recorded_position, start, wait_until
from tests.e2e.helpers import cli_run, kafka_admin, mm2_checkpoints, produce_to_partition

pytestmark = pytest.mark.e2e


def _python_workers(engine_pid: int) -> list[int]:
    """The Python workers of the warm engine (forked from its worker daemon); not the classic session's of this
    test process, which other tests go on using."""
    def is_daemon(pid: int) -> bool:
        try:
            return b"connectors.spark_worker_daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    tree, stack = [], [engine_pid]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack += children(pid)
    # A worker is a daemon's fork: the same command line, its parent the daemon.
    return [worker for daemon in tree if is_daemon(daemon) for worker in children(daemon) if is_daemon(worker)]


def _stream_through_a_new_partition_and_a_lost_task(stack, spark_remote: str, tmp_path: Path, case,
                                                   add_partition, sent_before: tuple[str, ...] = ()) -> None:
    """Runs the bridge as a user does and sends 50 records; `add_partition()` adds a partition while it runs, sends
    to it and returns what it sent; then the engine's Python workers are killed and 50 more are sent. Everything
    (and `sent_before`, sent before the run) arrives, at most the lost task's last round twice, and the run says it
    started again."""
    command, env = cli_run(tmp_path, case.bridges_file(), case.name, {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)
    run = start(command, env, tmp_path / "run.log")
    sent: list[str] = list(sent_before)
    try:
        first = [f"a{i}" for i in range(50)]
        case.send(first)
        sent += first
        wait_until(lambda: set(sent) <= set(case.arrived()), "the first records arrived")

        sent += add_partition()  # read from its start
        wait_until(lambda: set(sent) <= set(case.arrived()), "the new partition's records arrived", timeout_s=60)

        # The task's Python worker dies (a task lost): the stream starts again from its last commit.
        workers = _python_workers({s.name: s.pid for s in stack.status()}["spark"])
        assert workers, "no Python worker found"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        after = [f"b{i}" for i in range(50)]
        case.send(after)
        sent += after
        wait_until(lambda: set(sent) <= set(case.arrived()), "what was sent after the lost task arrived", timeout_s=90)
        assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        wait_until(lambda: recorded_position(env["DAGSTER_HOME"], case) == case.head(), "the position is recorded")
    finally:
        os.killpg(run.pid, signal.SIGINT)
        run.wait(60)

    arrived = case.arrived()
    assert set(arrived) == set(sent)
    assert sum(n - 1 for n in collections.Counter(arrived).values()) <= 50  # at most the lost task's last round
    assert "started again from its last commit" in (tmp_path / "run.log").read_text()


class CloudSinkFromProperties(CloudSink):
    """The Cloud sink as a Kafka Connect properties file with tasks.max=2: its stream runs two tasks."""

    def bridges_file(self) -> str:
        keys = {"name": self.name, "connector.class": "com.google.pubsub.kafka.sink.CloudPubSubSinkConnector",
                "tasks.max": "2", **self.config()}
        (self.tmp_path / "sink.properties").write_text(javaproperties.dumps(keys, timestamp=False))
        path = self.tmp_path / "bridges.yaml"
        path.write_text(yaml.safe_dump({"bridges": [{
            "properties": "sink.properties", "mode": "continuous",
            "batch": {"initial_offsets": "earliest"}, "continuous": CONTINUOUS}]}))
        return str(path)


def test_a_stream_takes_a_new_partition_survives_a_lost_task_and_commits_to_the_connect_group(
        stack, spark_remote, tmp_path, unique):
    case = CloudSinkFromProperties(unique, tmp_path)

    def add_partition() -> list[str]:
        kafka_admin()._admin.create_partitions([NewPartitions(case.topic, 3)])[case.topic].result(30)
        third = [f"p2-{i}" for i in range(20)]
        produce_to_partition(case.topic, 2, third)
        return third

    _stream_through_a_new_partition_and_a_lost_task(stack, spark_remote, tmp_path, case, add_partition)

    # tasks.max=2 of the properties file is the stream's task count (over the three partitions).
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        event = instance.get_latest_materialization_event(AssetKey(case.name))
    assert event.asset_materialization.metadata["stream_tasks"].value == 2

    # The Kafka Connect group holds the same position, as a stream's commits (kafka-consumer-groups shows its lag).
    commits = kafka_admin().commits(f"connect-{case.name}", {case.topic: [0, 1, 2]})
    assert sum(offset for offset, _ in commits.values()) == case.head()
    assert all(DeliveredCommit.from_metadata(metadata) is not None for _, metadata in commits.values())


def test_a_lite_source_stream_takes_a_new_lite_partition_and_survives_a_lost_task(stack, spark_remote, tmp_path,
                                                                                     unique):
    from google.cloud.pubsublite import Topic
    from google.cloud.pubsublite.types import MessageMetadata
    from google.protobuf.field_mask_pb2 import FieldMask

    from tests.e2e.lite_helpers import lite_connection, publish_lite
    from tests.e2e.test_continuous_e2e import LiteSource

    case = LiteSource(unique, tmp_path)

    def add_partition() -> list[str]:
        admin = lite_connection().admin(case.lite_topic.location.region)
        admin.update_topic(Topic(name=str(case.lite_topic), partition_config=Topic.PartitionConfig(
            count=3, capacity=Topic.PartitionConfig.Capacity(publish_mib_per_sec=4, subscribe_mib_per_sec=8))),
            FieldMask(paths=["partition_config"]))
        third = [f"p2-{i}" for i in range(30)]
        ids = publish_lite(case.lite_topic, [{"data": v.encode()} for v in third])  # a new publisher: 3 partitions
        assert any(MessageMetadata.decode(i).partition.value == 2 for i in ids), ids
        case.published += len(third)
        return third

    _stream_through_a_new_partition_and_a_lost_task(stack, spark_remote, tmp_path, case, add_partition)


class KafkaReplicaWithCheckpoints(KafkaReplica):
    """The Kafka -> Kafka sink's stream with MirrorMaker 2's checkpoints (its default) of one group, written every
    second; its target topic made beforehand with three partitions and three older records in partition 0, so that
    the target's offsets there are the source's plus three."""

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.group, self.alias = f"failover-{unique}", f"src-{unique}"
        target = os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
        KafkaAdmin(KafkaConnection(target)).create_topic(self.topic, 3)
        filler = Producer({"bootstrap.servers": target, "log_level": 3})
        for _ in range(3):
            filler.produce(self.topic, value=b"older", partition=0)
        assert filler.flush(30) == 0
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(3)])
        self.assigned = True

    def config(self):
        return {"topics": self.topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
                "source.cluster.alias": self.alias, "groups": self.group, "emit.checkpoints.interval.seconds": "1"}

    def arrived(self):
        return [value for value in super().arrived() if value != "older"]

    def checkpoints(self) -> dict:
        consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], "group.id": "check",
                             "enable.auto.commit": False})
        try:
            topic = f"{self.alias}.checkpoints.internal"
            if topic not in consumer.list_topics(timeout=10).topics:
                return {}
            consumer.assign([TopicPartition(topic, 0, 0)])
            return mm2_checkpoints([m for m in consumer.consume(1000, timeout=2) if m.error() is None])
        finally:
            consumer.close()


def test_a_kafka_replica_stream_writes_checkpoints_takes_a_new_partition_and_survives_a_lost_task(
        stack, spark_remote, tmp_path, unique):
    case = KafkaReplicaWithCheckpoints(unique, tmp_path)
    before = [f"s{i}" for i in range(10)]
    produce_to_partition(case.topic, 0, before)
    # A consumer of the source that had read four of them: on the target it goes on from the fifth, at offset 7.
    group = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": case.group,
                      "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition(case.topic, 0, 4)], asynchronous=False)
    group.close()
    expected = {(case.group, case.topic, 0): (0, 4, 7)}

    def add_partition() -> list[str]:
        # Written while the stream runs (each interval's range), before anything starts the stream again.
        wait_until(lambda: case.checkpoints() == expected, "the group's checkpoint was written")
        kafka_admin()._admin.create_partitions([NewPartitions(case.topic, 3)])[case.topic].result(30)
        third = [f"p2-{i}" for i in range(20)]
        produce_to_partition(case.topic, 2, third)
        return third

    _stream_through_a_new_partition_and_a_lost_task(stack, spark_remote, tmp_path, case, add_partition, tuple(before))
    # The ranges after it (copies again after the lost task among them) leave the group's checkpoint as it was.
    assert case.checkpoints() == expected
    commits = kafka_admin().commits(f"connect-{case.name}", {case.topic: [0, 1, 2]})
    assert sum(offset for offset, _ in commits.values()) == case.head()


@contextlib.contextmanager
def _user_run(case, tmp_path: Path, spark_remote: str) -> Iterator[tuple[subprocess.Popen, dict]]:
    """The bridge run as a user runs it (its log in run.log), interrupted at the end if it is still running."""
    command, env = cli_run(tmp_path, case.bridges_file(), case.name, {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)
    run = start(command, env, tmp_path / "run.log")
    try:
        yield run, env
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
            run.wait(60)


class KafkaReplicaOwnTarget(KafkaReplica):
    """The Kafka -> Kafka stream into a target topic made beforehand like its source (two partitions), with
    target.topic.create as given."""

    def __init__(self, unique, tmp_path, create: bool):
        super().__init__(unique, tmp_path)
        self.create = create
        KafkaAdmin(KafkaConnection(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"])).create_topic(self.topic, 2)

    def config(self):
        return {**super().config(), "target.topic.create": str(self.create).lower()}

    def target_partition(self, partition: int) -> list[tuple[int, str]]:
        consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], "group.id": "check",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(self.topic, partition, 0)])
            return [(m.partition(), m.value().decode()) for m in consumer.consume(1000, timeout=3) if m.error() is None]
        finally:
            consumer.close()


@pytest.mark.parametrize("create", [True, False])
def test_a_kafka_replica_stream_whose_source_gains_a_partition_adds_it_to_the_target_or_ends_naming_both_counts(
        stack, spark_remote, tmp_path, unique, create):
    """The source topic gains a partition its target lacks. By default the target gains it too, as MirrorMaker 2
    does, and the stream goes on in the same run with the new partition's records in the same partition there; with
    target.topic.create=false the stream ends at once with the batch's message, its last commit recorded, nothing of
    the new partition sent anywhere."""
    case = KafkaReplicaOwnTarget(unique, tmp_path, create)
    third = [f"p2-{i}" for i in range(20)]
    with _user_run(case, tmp_path, spark_remote) as (run, env):
        first = [f"a{i}" for i in range(50)]
        case.send(first)
        wait_until(lambda: set(first) <= set(case.arrived()), "the first records arrived")
        kafka_admin()._admin.create_partitions([NewPartitions(case.topic, 3)])[case.topic].result(30)
        produce_to_partition(case.topic, 2, third)
        if create:
            wait_until(lambda: [v for _, v in case.target_partition(2)] == third, "the new partition's records arrived",
                       timeout_s=60)
            wait_until(lambda: recorded_position(env["DAGSTER_HOME"], case) == case.head(), "the position is recorded")
            assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        else:
            wait_until(lambda: run.poll() is not None, "the run ended", timeout_s=60)
    log = (tmp_path / "run.log").read_text()
    assert sorted(case.arrived()) == sorted(first)  # once each, from partitions 0 and 1
    if create:
        return
    assert run.returncode != 0, log[-3000:]
    assert (f"target topic {case.topic} has 2 partitions, source topic {case.topic} has 3: target.partition=same "
            "needs as many") in log, log[-3000:]
    assert recorded_position(env["DAGSTER_HOME"], case) == len(first)
    assert kafka_admin().commits(f"connect-{case.name}", {case.topic: [2]}) == {}
    assert case.target_partition(2) == []


class KafkaReplicaNarrowTarget(KafkaReplica):
    """The Kafka -> Kafka stream into a target topic made beforehand to take records of at most 20,000 bytes."""

    def __init__(self, unique, tmp_path, tolerance: str):
        super().__init__(unique, tmp_path)
        self.tolerance, self.dead_letters = tolerance, f"dlq-{unique}"
        KafkaAdmin(KafkaConnection(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"])).create_topic(
            self.topic, 2, {"max.message.bytes": "20000"})

    def config(self):
        return {**super().config(), "errors.tolerance": self.tolerance,
                **({"errors.deadletterqueue.topic.name": self.dead_letters,
                    "errors.deadletterqueue.context.headers.enable": "true"} if self.tolerance == "all" else {})}


@pytest.mark.parametrize("tolerance", ["all", "none"])
def test_a_kafka_replica_stream_meets_a_record_its_target_refuses(stack, spark_remote, tmp_path, unique, tolerance):
    """A record the target refuses for good (larger than its topic takes) under errors.tolerance: with `all` it goes
    to the dead-letter topic and the stream goes on; with `none` the run ends naming the record, having delivered
    and recorded the records before it, none twice."""
    case = KafkaReplicaNarrowTarget(unique, tmp_path, tolerance)
    before, behind, beside = [f"a{i}" for i in range(10)], [f"b{i}" for i in range(10)], [f"c{i}" for i in range(10)]
    with _user_run(case, tmp_path, spark_remote) as (run, env):
        produce_to_partition(case.topic, 1, beside)
        produce_to_partition(case.topic, 0, before)
        wait_until(lambda: set(before + beside) <= set(case.arrived()), "the first records arrived")
        produce_to_partition(case.topic, 0, ["x" * 30_000, *behind])  # offset 10 of partition 0
        if tolerance == "all":
            wait_until(lambda: set(behind) <= set(case.arrived()), "the records behind the refused one arrived")
            wait_until(lambda: recorded_position(env["DAGSTER_HOME"], case) == case.head(), "the position is recorded")
            assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        else:
            wait_until(lambda: run.poll() is not None, "the run ended", timeout_s=90)
    log = (tmp_path / "run.log").read_text()
    arrived = case.arrived()
    assert len(arrived) == len(set(arrived)), "a record arrived twice"
    if tolerance == "all":
        assert set(arrived) == set(before + behind + beside)
        dead = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "check",
                         "enable.auto.commit": False})
        dead.assign([TopicPartition(case.dead_letters, 0, 0)])
        letters = [m for m in dead.consume(10, timeout=10) if m.error() is None]
        dead.close()
        assert [len(m.value()) for m in letters] == [30_000]
        assert dict(letters[0].headers())["__connect.errors.offset"] == b"10"
    else:
        assert run.returncode != 0
        assert f"topic {case.topic} partition 0 offset 10: the target Kafka refused it" in log, log[-3000:]
        assert set(arrived) == set(before + beside)
        assert recorded_position(env["DAGSTER_HOME"], case) == len(before + beside)


def test_a_kafka_replica_stream_goes_on_through_a_restart_of_the_target_broker(stack, spark_remote, tmp_path, unique):
    """The target cluster's broker stopped for a few seconds while the stream runs and records keep coming: the
    producer waits for it (as Kafka Connect's does, within delivery.timeout.ms), the stream goes on in the same run,
    and everything arrives, each record once (librdkafka's idempotent producer) and recorded."""
    case = KafkaReplica(unique, tmp_path)
    sent: list[str] = []
    with _user_run(case, tmp_path, spark_remote) as (run, env):
        first = [f"a{i}" for i in range(50)]
        case.send(first)
        sent += first
        wait_until(lambda: set(sent) <= set(case.arrived()), "the first records arrived")
        stack.down(only=("kafka_target",), log=lambda line: None)
        try:
            during = [f"d{i}" for i in range(50)]
            case.send(during)
            sent += during
            time.sleep(5)
        finally:
            stack.up(only=("kafka_target",), log=lambda line: None)
        after = [f"b{i}" for i in range(50)]
        case.send(after)
        sent += after
        wait_until(lambda: set(sent) <= set(case.arrived()), "what was sent during and after the restart arrived",
                   timeout_s=120)
        wait_until(lambda: recorded_position(env["DAGSTER_HOME"], case) == case.head(), "the position is recorded")
        assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
    arrived = case.arrived()
    assert sorted(arrived) == sorted(sent), collections.Counter(arrived).most_common(3)
