"""An always-on bridge through a Kafka broker restart: the run rides it out (its stream restarted from the last
recorded position if it failed), what arrives after it moves, and nothing is lost."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from connectors.framework.leased_job import STALLED
from tests.e2e.helpers import cli_run
from tests.e2e.test_continuous_e2e import (
    Archive, CloudSink, CloudSource, KafkaReplica, KinesisSink, LiteSink, LiteSource, PulsarSink, recorded_position,
    run_story, start, wait_while_running,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.mark.parametrize("case_type", [CloudSink, LiteSink, KinesisSink, PulsarSink, KafkaReplica, Archive, CloudSource,
                                       LiteSource])
def test_an_always_on_bridge_rides_out_a_kafka_broker_restart(stack, spark_remote, tmp_path, unique, fault_report,
                                                               case_type):
    case = case_type(unique, tmp_path)
    command, env = cli_run(tmp_path, case.bridges_file(), case.name, {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)
    before, after = [f"a{i}" for i in range(300)], [f"b{i}" for i in range(300)]
    run = start(command, env, tmp_path / "run.log")
    try:
        case.send(before[:100])
        home = env["DAGSTER_HOME"]
        # Recorded, not only arrived: until the run has seen the stream move, a stream stuck by the restart is started
        # again only after a first job's start allowance (131 s in all), past this test's wait (a clean-clone failure
        # of the Lite sink case: one commit, 0 moved, then silence).
        wait_while_running(run, home, lambda: set(before[:100]) <= set(case.arrived()) and (
            case.position_key is None or recorded_position(home, case) == 100), "the run recorded the first records")
        case.send(before[100:])  # still on their way when the broker stops
        stack.down(only=("kafka",), log=lambda line: None)
        down_at = time.monotonic()
        try:
            time.sleep(2)
        finally:
            stack.up(only=("kafka",), log=lambda line: None)
        case.send(after)
        wait_while_running(run, home, lambda: set(before + after) <= set(case.arrived()),
                           "everything arrived after the restart", timeout_s=120)
        recovered_s = time.monotonic() - down_at
        os.killpg(run.pid, signal.SIGINT)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)

    row = fault_report.count("Kafka broker stopped 2 s under an always-on bridge (warm engine)",
                             f"{case.connector.removesuffix('Connector')} (continuous)", set(before + after),
                             case.arrived(), recovered_s)
    assert row.lost == 0


def _descendants(pid: int) -> list[int]:
    table = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in table.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _forked_python_workers(run_pid: int) -> list[int]:
    """The Python workers of the run's own (classic, local) Spark session: forks of its worker daemon."""
    def is_daemon(pid: int) -> bool:
        try:
            return b"connectors.spark_worker_daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    daemons = [pid for pid in _descendants(run_pid) if is_daemon(pid)]
    return [worker for daemon in daemons for worker in _descendants(daemon) if is_daemon(worker)]


def test_an_always_on_bridge_whose_task_hangs_is_started_again(stack, tmp_path, unique, fault_report):
    """A task stuck where no deadline of ours reaches (its Python worker stopped, SIGSTOP) moves nothing while records
    wait: the run ends that job and starts the stream again, saying so, and everything arrives. (The run's own
    classic Spark session, so that only its workers are stopped.)"""
    case = CloudSink(unique, tmp_path)
    bridges = yaml.safe_load(Path(case.bridges_file()).read_text())
    bridges["bridges"][0]["batch"]["outage_timeout_seconds"] = 5  # a stall after 2 x 5 s + the 1 s commit interval
    Path(tmp_path / "bridges.yaml").write_text(yaml.safe_dump(bridges))
    command, env = cli_run(tmp_path, str(tmp_path / "bridges.yaml"), case.name, always_on=True)
    before, after = [f"a{i}" for i in range(100)], [f"b{i}" for i in range(200)]
    run = start(command, env, tmp_path / "run.log")
    home = env["DAGSTER_HOME"]
    stopped: list[int] = []
    try:
        case.send(before)
        # Recorded, not only arrived: a task stopped between its delivery and its commit leaves a stream that has
        # moved nothing yet, whose stall limit is 120 s longer (a first job's start), past this test's wait.
        wait_while_running(run, home, lambda: recorded_position(home, case) == len(before),
                           "the run recorded the first records")
        stalls_before = run_story(home).count(STALLED)
        stopped = _forked_python_workers(run.pid)
        assert stopped, "no Python worker of the run's session found"
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        stalled_at = time.monotonic()
        case.send(after)
        wait_while_running(run, home, lambda: run_story(home).count(STALLED) > stalls_before,
                           "the run saw the stream stalled", timeout_s=60)
        for pid in stopped:  # the stuck task's worker was killed with its task; idle ones go on
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        wait_while_running(run, home, lambda: set(before + after) <= set(case.arrived()),
                           "everything arrived after the restart")
        recovered_s = time.monotonic() - stalled_at
        os.killpg(run.pid, signal.SIGINT)
        run.wait(timeout=30)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    row = fault_report.count("the stream task's Python worker stopped (SIGSTOP) under an always-on bridge",
                             "CloudPubSubSink (continuous)", set(before + after), case.arrived(), recovered_s)
    assert row.lost == 0
