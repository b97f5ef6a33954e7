"""The faults every exactly-once fault test inflicts on a bridge that writes Kafka, in one sequence: the run killed
-9 at three random moments while it writes, the engine's Python workers killed once, the broker that holds the
transactions restarted once, two runs started together, then runs until done. An always-on bridge's runs do not
end on their own: the same sequence inside runs that go on (inflict_faults_always_on), in a host beside an
at-least-once bridge that must keep moving (HostNeighbour)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import yaml

from tests.e2e.helpers import cli_run, kafka_admin, read_committed
from tests.e2e.lite_helpers import LOCATION, PROJECT, create_lite_topic, publish_lite


def python_workers(stack) -> list[int]:
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


class Run:
    """A run of the bridge in its own process group, its log kept to say why it ended when it ended early."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path):
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log,
                                            start_new_session=True)

    def wait_until_writing(self, written: Callable[[], int], timeout_s: float = 120) -> None:
        baseline, deadline = written(), time.monotonic() + timeout_s
        while written() <= baseline:
            assert self.process.poll() is None and time.monotonic() < deadline, \
                f"the run ended before it wrote anything: {self.why()}"
            time.sleep(0.05)

    def why(self) -> str:
        return "\n".join(line for line in open(self.log_path).read().splitlines()
                         if " - DEBUG - " not in line and not line.startswith(" "))[-3000:]

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self, timeout_s: float = 60) -> None:
        """SIGINT (Ctrl-C, Dagster's termination), then SIGKILL if it has not ended within `timeout_s`."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()


def inflict_faults(stack, command: list[str], env: dict[str, str], logs: Path, rng: random.Random,
                   written: Callable[[], int], broker: str, kill_within_s: float,
                   done: Callable[[], bool]) -> None:
    """The sequence; `written` counts the records in the target topic (committed or not), `broker` is the stack's
    service holding the transactions, `done` says whether every record arrived."""
    for attempt in range(3):  # kill -9 of the run's process group at a random moment while it writes
        run = Run(command, env, logs / f"killed-{attempt}.log")
        run.wait_until_writing(written)
        time.sleep(rng.uniform(0, kill_within_s))
        run.kill()

    run = Run(command, env, logs / "worker-killed.log")
    run.wait_until_writing(written)
    workers = python_workers(stack)
    assert workers, "no Python worker of the warm engine found"
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    run.process.wait(timeout=300)  # it fails or Spark retries the task: either way the next runs go on

    # A batch that ended before its workers were killed leaves them dead in the engine's pool: the next job's task
    # fails once ("Stream closed"), and the run after that gets new ones.
    for attempt in range(3):
        run = Run(command, env, logs / f"broker-restarted-{attempt}.log")
        try:
            run.wait_until_writing(written)
            break
        except AssertionError:
            if attempt == 2:
                raise
    stack.down(only=(broker,), log=lambda line: None)
    try:
        time.sleep(2)
    finally:
        stack.up(only=(broker,), log=lambda line: None)
    run.process.wait(timeout=300)

    together = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(2)]
    [r.wait(timeout=300) for r in together]

    for _ in range(12):  # then runs until done
        if done():
            return
        subprocess.run(command, env=env, capture_output=True, timeout=300)


def inflict_faults_on(stack, bridges: str, name: str, logs: Path, unique: str, spark_remote: str, always_on: bool,
                      written: Callable[[], int], broker: str, kill_within_s: float,
                      done: Callable[[], bool]) -> tuple[list[str], dict[str, str]]:
    """The sequence on bridge `name` of the bridges file: its own micro-batch runs (inflict_faults), or with
    `always_on` its host's runs with a HostNeighbour beside it, whose messages must all arrive too
    (inflict_faults_always_on). Returns the bridge's micro-batch command line and environment."""
    engine = {"BRIDGE_SPARK_REMOTE": spark_remote}
    command, env = cli_run(logs, bridges, name, engine)
    if not always_on:
        inflict_faults(stack, command, env, logs, random.Random(unique), written, broker, kill_within_s, done)
        return command, env
    neighbour = HostNeighbour(unique)
    neighbour.join_host(bridges, f"eos_{unique}")
    host_command, host_env = cli_run(logs, bridges, f"host_eos_{unique}", engine, always_on=True)
    neighbour.start()
    inflict_faults_always_on(stack, host_command, host_env, logs, random.Random(unique), written, broker,
                             kill_within_s, lambda: done() and neighbour.moved_everything())
    return command, env


def inflict_faults_always_on(stack, command: list[str], env: dict[str, str], logs: Path, rng: random.Random,
                             written: Callable[[], int], broker: str, kill_within_s: float,
                             done: Callable[[], bool]) -> None:
    """inflict_faults for an always-on bridge: the run killed -9 three times while it writes; in the next run the
    engine's Python workers killed, then the broker restarted, the run writing again after each (its stream is
    started again inside it); that run stopped, two started together, and those stopped (SIGINT, what Dagster's
    termination sends) once everything arrived."""
    for attempt in range(3):
        run = Run(command, env, logs / f"killed-{attempt}.log")
        run.wait_until_writing(written)
        time.sleep(rng.uniform(0, kill_within_s))
        run.kill()
        # The killed run's stream task goes on in the engine until it sees its lease lapse: once it has stopped,
        # what the next run is seen writing is its own.
        _until_quiet(written)

    run = Run(command, env, logs / "worker-killed-then-broker-restarted.log")
    try:
        run.wait_until_writing(written)
        workers = python_workers(stack)
        assert workers, "no Python worker of the warm engine found"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        run.wait_until_writing(written, timeout_s=180)
        stack.down(only=(broker,), log=lambda line: None)
        try:
            time.sleep(2)
        finally:
            stack.up(only=(broker,), log=lambda line: None)
        run.wait_until_writing(written, timeout_s=180)
    finally:
        run.stop()

    together = [Run(command, env, logs / f"together-{i}.log") for i in range(2)]
    try:
        deadline = time.monotonic() + 300
        while not done():
            assert time.monotonic() < deadline, "not everything arrived within 300 s of the two runs' start: " \
                                                 f"{together[0].why()}\n{together[1].why()}"
            time.sleep(1)
    finally:
        for run in together:
            run.stop()


def _until_quiet(written: Callable[[], int], quiet_s: float = 2.0, timeout_s: float = 60) -> None:
    last, since, deadline = written(), time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, f"records still written {timeout_s} s after the run was killed"
        time.sleep(0.2)
        now = written()
        if now != last:
            last, since = now, time.monotonic()


class HostNeighbour:
    """An at-least-once Pub/Sub Lite source bridge in the host of the bridge under test: its messages, published at
    a steady pace while the faults land, must all reach Kafka (at least once) while the exactly-once bridge beside
    it is killed, fenced and restarted with it."""

    MESSAGES, PER_SECOND = 600, 20

    def __init__(self, unique: str):
        self.name, self.topic = f"eos_neighbour_{unique}", f"eos-neighbour-{unique}"
        kafka_admin().create_topic(self.topic, partitions=2)
        self.lite_topic, self.subscription = create_lite_topic(self.topic, partitions=2)
        self.values = [f"n{i:04d}" for i in range(self.MESSAGES)]
        self._publishing = threading.Thread(target=self._publish, daemon=True)

    def join_host(self, bridges_file: str | Path, host: str) -> None:
        """Moves the file's bridge into `host`, always on, and adds this one beside it."""
        path = Path(bridges_file)
        document = yaml.safe_load(path.read_text())
        for entry in document["bridges"]:
            entry["mode"] = "continuous"
            entry["continuous"] = {**entry.get("continuous", {}), "host": host}
        document["bridges"].append({
            "name": self.name, "connector": "PubSubLiteSourceConnector", "continuous": {"host": host},
            "config": {"pubsublite.project": PROJECT, "pubsublite.location": LOCATION,
                       "pubsublite.subscription": self.subscription.name, "kafka.topic": self.topic}})
        path.write_text(yaml.safe_dump(document))

    def start(self) -> None:
        self._publishing.start()

    def _publish(self) -> None:
        started = time.monotonic()
        for i in range(0, self.MESSAGES, 10):
            publish_lite(self.lite_topic, [{"data": value.encode()} for value in self.values[i:i + 10]])
            time.sleep(max(0.0, started + (i + 10) / self.PER_SECOND - time.monotonic()))

    def moved_everything(self) -> bool:
        if self._publishing.is_alive():
            return False
        arrived = {m.value().decode() for m in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], self.topic, 2,
                                                               1.0)}
        return set(self.values) <= arrived


def written_to(topic: str) -> int:
    """Records in a topic of the stack's Kafka, committed or not (a transaction's records count as soon as they are
    written)."""
    admin = kafka_admin()
    return sum(admin.end_offsets(admin.partitions([topic]))[topic].values())


def committed_values(topic: str, partitions: int) -> list[str]:
    """The values a read_committed consumer of the stack's Kafka sees in `topic`, in each partition's order."""
    return [m.value().decode() for m in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], topic, partitions, 3)]
