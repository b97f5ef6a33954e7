"""A Spark executor killed mid-batch on the standalone cluster: Spark runs its tasks again on another
executor, the run succeeds, and nothing is lost; what the dead executor published before it died comes
again (at-least-once)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import cli_run
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
