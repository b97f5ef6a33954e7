"""Exactly once into Kafka through faults (issue #33), the Lite source on the warm engine as Dagster runs it: 20,000
messages, the run killed -9 at three random moments while it writes, the engine's Python workers killed once, the
Kafka broker restarted once, two runs started together, then runs until done. A read_committed consumer counts
every record; with exactly.once.support=required each arrives once and in order per key, and with the default
(requested) the same faults show the copies at-least-once allows."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.e2e.helpers import cli_run, kafka_admin
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, publish_lite

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
MESSAGES, KEYS = 20_000, 60


def _written(topic: str) -> int:
    """Records in the topic, committed or not (a transaction's records count as soon as they are written)."""
    admin = kafka_admin()
    return sum(admin.end_offsets(admin.partitions([topic]))[topic].values())


def _read_committed(topic: str) -> list[tuple[int, str]]:
    """(Kafka partition, value) of every record a read_committed consumer sees, in each partition's order."""
    admin = kafka_admin()
    partitions = admin.partitions([topic])[topic]
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "eos-counter",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < 3:
        batch = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
        if batch:
            records += [(m.partition(), m.value().decode()) for m in batch]
            quiet_since = time.monotonic()
    consumer.close()
    return records


def _python_workers(stack) -> list[int]:
    """The warm engine's Python worker processes (its daemons and the workers they forked): descendants of this
    stack's Spark Connect server (they start sessions of their own, so not its process group)."""
    table = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in table.splitlines()]
    children: dict[str, list[list[str]]] = {}
    for row in rows:
        children.setdefault(row[1], []).append(row)
    found, todo = [], [str(stack._alive("spark"))]
    while todo:
        for pid, _, args in children.get(todo.pop(), []):
            todo.append(pid)
            if "spark_worker_daemon" in args:
                found.append(int(pid))
    return found


def _when_writing(topic: str) -> callable:
    baseline = _written(topic)
    return lambda: _written(topic) > baseline


class _Run:
    """A run of the bridge in its own process group, its log kept to say why it ended when it ended early."""

    def __init__(self, command: list[str], env: dict[str, str], log_path):
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log,
                                            start_new_session=True)

    def wait_until_writing(self, topic: str, timeout_s: float = 120) -> None:
        writing, deadline = _when_writing(topic), time.monotonic() + timeout_s
        while not writing():
            assert self.process.poll() is None and time.monotonic() < deadline, \
                f"the run ended before it wrote anything: {self.why()}"
            time.sleep(0.05)

    def why(self) -> str:
        return "\n".join(line for line in open(self.log_path).read().splitlines()
                         if " - DEBUG - " not in line and not line.startswith(" "))[-3000:]

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@pytest.mark.parametrize("support", ["required", "requested"])
def test_the_lite_source_through_kills_a_worker_kill_a_broker_restart_and_two_runs_at_once(
        stack, spark_remote, tmp_path, unique, fault_report, support):
    rng = random.Random(unique)
    name, kafka_topic = f"eos_fault_{unique}", f"eos-fault-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=3)
    topic, subscription = create_lite_topic(f"eos-fault-{unique}", partitions=3)
    # Values say their key and their place in it: "k07:0123".
    produced = [f"k{i % KEYS:02d}:{i // KEYS:04d}" for i in range(MESSAGES)]
    publish_lite(topic, [{"data": value.encode(), "ordering_key": value[:3]} for value in produced])
    # Small read grants: a batch of 4,000 takes a few seconds to write, so the faults land inside it.
    config = {"pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic,
              "pubsublite.partition_flow_control.messages": "10", "exactly.once.support": support}
    bridges = lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", config,
                                {"max_records": 4000, "outage_timeout_seconds": 60})
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    started = time.monotonic()

    for attempt in range(3):  # kill -9 of the run's process group at a random moment while it writes
        run = _Run(command, env, tmp_path / f"killed-{attempt}.log")
        run.wait_until_writing(kafka_topic)
        time.sleep(rng.uniform(0, 1.0))
        run.kill()

    run = _Run(command, env, tmp_path / "worker-killed.log")
    run.wait_until_writing(kafka_topic)
    workers = _python_workers(stack)
    assert workers, "no Python worker of the warm engine found"
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    run.process.wait(timeout=300)  # it fails or Spark retries the task: either way the next runs go on

    run = _Run(command, env, tmp_path / "broker-restarted.log")
    run.wait_until_writing(kafka_topic)
    stack.down(only=("kafka",), log=lambda line: None)
    try:
        time.sleep(2)
    finally:
        stack.up(only=("kafka",), log=lambda line: None)
    run.process.wait(timeout=300)

    together = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(2)]
    [r.wait(timeout=300) for r in together]

    for _ in range(12):  # then runs until done
        records = _read_committed(kafka_topic)
        if len({value for _, value in records}) >= MESSAGES:
            break
        subprocess.run(command, env=env, capture_output=True, timeout=300)
    records = _read_committed(kafka_topic)
    row = fault_report.count(f"exactly.once.support={support}: 3 kill -9 of the run, the Python workers killed, "
                             "the broker restarted, two runs at once (warm engine)", "PubSubLiteSource",
                             set(produced), [value for _, value in records], time.monotonic() - started)
    assert row.lost == 0
    if support == "required":
        assert row.duplicated == 0
        # In order per key: a key's values arrive in their Kafka partition in the order they were published.
        places: dict[str, list[int]] = {}
        for _, value in records:
            places.setdefault(value[:3], []).append(int(value[4:]))
        assert all(seq == sorted(seq) for seq in places.values())
