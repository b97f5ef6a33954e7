"""A Spark executor killed on the standalone cluster, mid-batch (Spark runs its tasks again on another executor, the
run succeeds, and nothing is lost; what the dead executor published before it died comes again, at-least-once) and
under an always-on stream (the stream goes on in the same run from its last commit)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import cli_run
from tests.e2e.test_continuous_e2e import KafkaReplica, recorded_position, start, wait_until
from tests.faults.test_run_faults import SLOW, Subscription, _bridge

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


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
