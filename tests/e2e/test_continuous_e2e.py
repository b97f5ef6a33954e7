"""`mode: continuous` for every connector, on the warm engine, as a user runs it
(`dagster job execute -j <bridge>_job` in its own process group):

1. a run keeps moving what arrives and records its position while it goes on;
2. the run is killed -9 while records keep arriving; a new run moves everything: nothing is lost, and
   the copies are at most what was moved after the last recorded position (none under exactly once);
3. the new run is terminated (SIGINT, what Dagster's termination and Ctrl-C send): it exits within
   seconds with its position recorded up to what had arrived.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import boto3
import pulsar
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from dagster import AssetKey, DagsterInstance
from google.cloud import pubsub_v1

from connectors.s3_block_gzip_sink.reader import read_from_offset
from tests.e2e.helpers import (
    PROJECT, cli_run, create_kinesis_stream, create_pubsub_topic, kafka_admin, kinesis_records_by_shard, produce,
    read_committed,
)
from tests.e2e.lite_helpers import LOCATION, create_lite_topic, publish_lite, read_whole_lite_topic
from tests.e2e.test_pubsublite_source_e2e import read_kafka

pytestmark = pytest.mark.e2e

# A run of its own (host: null): what these tests follow is one bridge's run (the default host is one name away).
CONTINUOUS = {"trigger_interval_ms": 100, "commit_interval_ms": 1000, "max_run_minutes": 5, "host": None}


class Case:
    """One connector's ends: what a test sends, what arrived, what position the bridge recorded."""

    connector: str
    position_key: str | None = None  # metadata entry holding the position; None: the connector keeps none

    def __init__(self, unique: str, tmp_path: Path):
        self.unique, self.tmp_path = unique, tmp_path
        self.name = f"cont_{type(self).__name__.lower()}_{unique}"

    @property
    def run_name(self) -> str:
        """What the run is named after: the bridge (a run of its own) or its host."""
        return self.name

    def check_beside(self) -> None:
        """What else the run moved is checked here (the other bridges of a host)."""

    def config(self) -> dict:
        raise NotImplementedError

    def send(self, values: list[str]) -> None:
        raise NotImplementedError

    def arrived(self) -> list[str]:
        raise NotImplementedError

    def head(self) -> int:
        """How far the source has got (Kafka end offsets, Lite head cursors), summed over partitions."""
        raise NotImplementedError

    def bridges_file(self) -> str:
        path = self.tmp_path / "bridges.yaml"
        path.write_text(yaml.safe_dump({"bridges": [{
            "name": self.name, "connector": self.connector, "mode": "continuous", "config": self.config(),
            "batch": {"initial_offsets": "earliest", "parallelism": 1}, "continuous": CONTINUOUS}]}))
        return str(path)


class KafkaSourced(Case):
    position_key = "kafka_offsets"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.topic = f"cont-{type(self).__name__.lower()}-{unique}"
        kafka_admin().create_topic(self.topic, partitions=2)

    def send(self, values):
        produce(self.topic, [(None, v) for v in values])

    def head(self):
        admin = kafka_admin()
        return sum(admin.end_offsets(admin.partitions([self.topic]))[self.topic].values())


class CloudSink(KafkaSourced):
    connector = "CloudPubSubSinkConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.subscription = create_pubsub_topic(self.topic)
        self.subscriber = pubsub_v1.SubscriberClient()
        self.received: list[str] = []

    def config(self):
        return {"topics": self.topic, "cps.project": PROJECT, "cps.topic": self.topic,
                "value.converter": "org.apache.kafka.connect.storage.StringConverter"}

    def arrived(self):
        response = self.subscriber.pull(subscription=self.subscription, max_messages=1000, return_immediately=True)
        if response.received_messages:
            self.received += [m.message.data.decode() for m in response.received_messages]
            self.subscriber.acknowledge(subscription=self.subscription,
                                        ack_ids=[m.ack_id for m in response.received_messages])
        return self.received


class LiteSink(KafkaSourced):
    connector = "PubSubLiteSinkConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.lite_topic, self.subscription = create_lite_topic(self.topic, partitions=2)

    def config(self):
        return {"topics": self.topic, "pubsublite.project": PROJECT, "pubsublite.location": LOCATION,
                "pubsublite.topic": self.topic}

    def arrived(self):
        return [m.message.data.decode() for m in read_whole_lite_topic(self.lite_topic, self.subscription, 2)]


class Archive(KafkaSourced):
    connector = "S3BlockGzipSinkConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.bucket = f"cont-{unique}"
        self.s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        self.s3.create_bucket(Bucket=self.bucket)

    def config(self):
        return {"topics": self.topic, "s3.bucket": self.bucket, "s3.prefix": "c", "s3.path_style": True,
                "value.converter": "org.apache.kafka.connect.storage.StringConverter"}

    def arrived(self):
        return [line.decode() for p in (0, 1)
                for _, line in read_from_offset(self.s3, self.bucket, "c", self.topic, p, 0)]


class KafkaReplica(KafkaSourced):
    """Kafka -> the second cluster without consumer-group checkpoints (with them: test_kafka_stream_e2e)."""

    connector = "KafkaSinkConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
                                  "group.id": "check", "enable.auto.commit": False})
        self.received: list[str] = []
        self.assigned = False

    def config(self):
        return {"topics": self.topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
                "emit.checkpoints.enabled": "false"}

    def arrived(self):
        if not self.assigned:  # the bridge makes the target topic
            if self.topic not in self.consumer.list_topics(timeout=10).topics:
                return self.received
            self.consumer.assign([TopicPartition(self.topic, p, 0) for p in (0, 1)])
            self.assigned = True
        self.received += [m.value().decode() for m in self.consumer.consume(1000, timeout=0.5) if m.error() is None]
        return self.received


class KinesisSink(KafkaSourced):
    connector = "KinesisSinkConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        create_kinesis_stream(self.topic, 1)

    def config(self):
        return {"topics": self.topic, "kinesis.stream.name": self.topic}

    def arrived(self):
        return [r["Data"].decode() for records in kinesis_records_by_shard(self.topic).values() for r in records]


class PulsarSink(KafkaSourced):
    connector = "PulsarSinkConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.client = pulsar.Client(os.environ["PULSAR_SERVICE_URL"], logger=_quiet_pulsar_log())
        self.consumer = self.client.subscribe(f"persistent://public/default/{self.topic}", "check",
                                              initial_position=pulsar.InitialPosition.Earliest)
        self.received: list[str] = []

    def config(self):
        return {"topics": self.topic, "pulsar.service.url": os.environ["PULSAR_SERVICE_URL"]}

    def arrived(self):
        try:
            while True:
                self.received.append(self.consumer.receive(timeout_millis=100).data().decode())
        except pulsar.Timeout:
            return self.received


def _quiet_pulsar_log():
    logger = logging.getLogger("test-pulsar")
    logger.setLevel(logging.WARNING)
    return logger


class CloudSource(Case):
    connector = "CloudPubSubSourceConnector"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.topic = f"cont-cloudsource-{unique}"
        kafka_admin().create_topic(self.topic, partitions=2)
        self.subscription = create_pubsub_topic(self.topic)
        self.publisher = pubsub_v1.PublisherClient()
        self.published = 0

    def config(self):
        return {"cps.project": PROJECT, "cps.subscription": self.subscription.rsplit("/", 1)[1],
                "kafka.topic": self.topic}

    def send(self, values):
        topic_path = self.publisher.topic_path(PROJECT, self.topic)
        [f.result() for f in [self.publisher.publish(topic_path, v.encode()) for v in values]]
        self.published += len(values)

    def arrived(self):
        return [r.value().decode() for r in read_kafka(self.topic)]

    def head(self):
        return self.published


class LiteSource(Case):
    connector = "PubSubLiteSourceConnector"
    position_key = "lite_cursors"

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.topic = f"cont-litesource-{unique}"
        kafka_admin().create_topic(self.topic, partitions=2)
        self.lite_topic, self.subscription = create_lite_topic(self.topic, partitions=2)
        self.published = 0

    def config(self):
        return {"pubsublite.project": PROJECT, "pubsublite.location": LOCATION,
                "pubsublite.subscription": self.subscription.name, "kafka.topic": self.topic}

    def send(self, values):
        publish_lite(self.lite_topic, [{"data": v.encode()} for v in values])
        self.published += len(values)

    def arrived(self):
        return [r.value().decode() for r in read_kafka(self.topic)]

    def head(self):
        return self.published


class LiteSourceExactlyOnce(LiteSource):
    """exactly.once.support=required: a read_committed consumer sees every record once, through the kill."""

    exactly_once = True

    def config(self):
        return {**super().config(), "exactly.once.support": "required"}

    def arrived(self):
        return [r.value().decode() for r in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], self.topic, 2,
                                                           quiet_s=1.0)]

    def transactions_position(self) -> int:
        """The next cursors committed in the bridge's positions topic, summed over the Lite partitions."""
        from connectors.kafka.transactions import PositionsTopic
        from connectors.pubsublite_source.config import PubSubLiteSourceConfig
        from connectors.pubsublite_source.exactly_once import position_key

        config = PubSubLiteSourceConfig.model_validate(self.config())
        topic = PositionsTopic(config.positions_topic_name(self.name),
                               {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
        return sum(p["next_cursor"] for p in topic.latest_of({p: position_key(config, p) for p in range(2)}).values())


class HostedLiteSourceExactlyOnce(LiteSourceExactlyOnce):
    """The same in a host's run, beside an at-least-once Lite source that keeps moving through the kill."""

    def __init__(self, unique, tmp_path):
        super().__init__(unique, tmp_path)
        self.host = f"eos_{unique}"
        self.neighbour = LiteSource(f"{unique}n", tmp_path)
        self.neighbour_sent: list[str] = []

    @property
    def run_name(self) -> str:
        return f"host_{self.host}"

    def bridges_file(self) -> str:
        hosted = {**CONTINUOUS, "host": self.host}
        path = self.tmp_path / "bridges.yaml"
        path.write_text(yaml.safe_dump({"bridges": [{
            "name": case.name, "connector": case.connector, "config": case.config(),
            "batch": {"initial_offsets": "earliest", "parallelism": 1}, "continuous": hosted}
            for case in (self, self.neighbour)]}))
        return str(path)

    def send(self, values):
        super().send(values)
        self.neighbour.send([f"n-{v}" for v in values])
        self.neighbour_sent += [f"n-{v}" for v in values]

    def check_beside(self) -> None:
        wait_until(lambda: set(self.neighbour_sent) <= set(self.neighbour.arrived()),
                   "the neighbour's records arrived")


def recorded_position(home: str, case: Case) -> int | None:
    """The position in the bridge's latest materialization, summed over partitions."""
    with DagsterInstance.from_config(home) as instance:
        event = instance.get_latest_materialization_event(AssetKey(case.name))
    if event is None:
        return None
    value = event.asset_materialization.metadata[case.position_key].value
    if case.position_key == "kafka_offsets":
        return sum(o for parts in value.values() for o in parts.values())
    return sum(value.values())


def wait_until(condition, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def run_story(home: str) -> str:
    """What a failed wait shows: the status of every run in `home` and the lines the bridge logged (its warnings,
    restarts and commit lines), the last ones first cut."""
    with DagsterInstance.from_config(home) as instance:
        told = []
        for run in instance.get_runs():
            told.append(f"run {run.run_id[:8]}: {run.status.value}")
            told += [f"  {logging.getLevelName(e.level)} {e.user_message[:400]}" for e in instance.all_logs(run.run_id)
                     if not e.is_dagster_event or e.level >= logging.WARNING][-40:]
    return "\n".join(told)


def wait_while_running(run: subprocess.Popen, home: str, condition, what: str, timeout_s: float = 90) -> None:
    """`wait_until` that fails at once if the run ended, and tells the run's story when it fails."""
    def done() -> bool:
        if run.poll() is not None:
            pytest.fail(f"the run ended (exit {run.returncode}) before {what}\n{run_story(home)}")
        return condition()

    try:
        wait_until(done, what, timeout_s)
    except AssertionError as exc:
        pytest.fail(f"{exc}\n{run_story(home)}")


def start(command, env, log: Path) -> subprocess.Popen:
    return subprocess.Popen(command, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


@pytest.mark.parametrize("case_type", [CloudSink, LiteSink, KinesisSink, PulsarSink, KafkaReplica, Archive, CloudSource,
                                       LiteSource, LiteSourceExactlyOnce, HostedLiteSourceExactlyOnce])
def test_continuous_run_moves_survives_kill_and_stops_on_termination(stack, spark_remote, tmp_path, unique, case_type):
    case = case_type(unique, tmp_path)
    command, env = cli_run(tmp_path, case.bridges_file(), case.run_name, {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)
    home = env["DAGSTER_HOME"]
    first_wave = [f"a{i}" for i in range(100)]
    second_wave = [f"b{i}" for i in range(300)]
    third_wave = [f"c{i}" for i in range(50)]

    # 1. Moving and recording while the run goes on.
    first = start(command, env, tmp_path / "first.log")
    try:
        case.send(first_wave)
        wait_until(lambda: set(first_wave) <= set(case.arrived()), "the first wave arrived")
        if case.position_key:
            wait_until(lambda: recorded_position(home, case) == case.head(), "the first wave's position is recorded")
        assert first.poll() is None, "the continuous run ended on its own"

        # 2. Killed -9 while records keep arriving.
        sender = threading.Thread(target=lambda: [case.send(second_wave[i:i + 10]) or time.sleep(0.05)
                                                  for i in range(0, len(second_wave), 10)])
        sender.start()
        time.sleep(1.0)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        at_kill = (recorded_position(home, case), case.head()) if case.position_key else None
        sender.join()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)

    second = start(command, env, tmp_path / "second.log")
    try:
        everything = first_wave + second_wave
        wait_until(lambda: set(everything) <= set(case.arrived()), "the second wave arrived after the restart")

        # 3. Terminated: exits within seconds, its position recorded up to everything that arrived.
        wait_until(lambda: "always on: moving" in (tmp_path / "second.log").read_text(),
                   "the second run's step started")
        case.send(third_wave)
        everything += third_wave
        wait_until(lambda: set(everything) <= set(case.arrived()), "the third wave arrived")
        case.check_beside()
        time.sleep(0.5)
        stopping = time.monotonic()
        os.killpg(second.pid, signal.SIGINT)
        second.wait(timeout=30)
        assert time.monotonic() - stopping < 15, "the run took too long to stop"
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)

    arrived = case.arrived()
    assert set(arrived) == set(everything)  # nothing lost, nothing invented
    copies = sum(n - 1 for n in collections.Counter(arrived).values())
    if getattr(case, "exactly_once", False):
        assert copies == 0, f"{copies} copies under exactly once"
        assert case.transactions_position() == case.head()  # the records' cursors committed with them
    if case.position_key:
        assert recorded_position(home, case) == case.head()
        recorded_at_kill, head_at_kill = at_kill
        assert copies <= head_at_kill - (recorded_at_kill or 0), "more copies than moved after the last commit"
    else:  # Pub/Sub redelivers what was not acknowledged; acknowledged messages never come again
        assert copies <= len(second_wave)
    with DagsterInstance.from_config(home) as instance:
        second_run = instance.get_runs(limit=1)[0]
        latest = instance.get_latest_materialization_event(AssetKey(case.name))
        lines = [e.user_message for e in instance.all_logs(second_run.run_id) if not e.is_dagster_event]
    assert latest.run_id == second_run.run_id  # the terminated run recorded where it stopped
    # One line per commit interval (and one at the end), not per micro-batch.
    ours = [line for line in lines if case.run_name == case.name or case.name in line]  # a host's: this bridge's
    commit_lines = [line for line in ours if " moved in " in line or "nothing moved" in line]
    assert 1 <= len(commit_lines) < 60, lines
    # Every connector's continuous run is a stream: its commits count progress reads, not micro-batches.
    assert any("progress reads" in line for line in commit_lines), commit_lines
