"""Faults around a run of the Cloud Pub/Sub sink on the warm engine (Spark Connect), as Dagster runs it:
two runs of one bridge at once, the run's process group killed mid-batch (with and without its
watchdog: the batch's lease stops it either way), and the engine's Python workers killed mid-batch. Every record carries a unique id."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance
from dagster import DagsterRunStatus, RunsFilter
from google.api_core.exceptions import Cancelled, DeadlineExceeded
from google.cloud import pubsub_v1

from resources.lease import pool_name
from tests.e2e.helpers import (
    cli_run, create_pubsub_topic, drain, kafka_admin, kill_run_midway, produce, sink_bridges_file,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

# One message per publish request and one request in flight: a batch of a few thousand records takes
# seconds, long enough to be hit part-way through.
SLOW = {"maxBufferSize": "1", "maxOutstandingMessages": "1"}
ACK_DEADLINE_S = 10  # the emulator's default for a subscription


def _bridge(tmp_path: Path, unique: str, records: int, keys: dict | None = None,
            partitions: int = 2, batch: dict | None = None) -> tuple[str, str, set[str], str]:
    topic, name = f"fault-{unique}", f"fault_{unique}"
    kafka_admin().create_topic(topic, partitions=partitions)
    subscription = create_pubsub_topic(topic)
    produced = {f"r{i}" for i in range(records)}
    produce(topic, [(None, value) for value in sorted(produced)])
    return name, subscription, produced, sink_bridges_file(tmp_path, name, topic, keys,
                                                           {"max_records": records, **(batch or {})})


def _wait_for(condition, timeout_s: float = 120, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _lease_holders(instance: DagsterInstance, name: str) -> list[str]:
    return [s.run_id for s in instance.event_log_storage.get_concurrency_info(pool_name(name)).claimed_slots]


class Subscription:
    """Pulls (and acks) what has arrived so far, keeping every copy."""

    def __init__(self, path: str):
        self.path, self.client, self.received = path, pubsub_v1.SubscriberClient(), []
        self._abandoned_at: float | None = None  # when a pull last ran out of time on our side

    def pull_some(self) -> int:
        try:  # the emulator holds an empty pull until its deadline: keep it short to see the first message soon
            response = self.client.pull(subscription=self.path, max_messages=1000, timeout=0.5,
                                        retry=None)
        except (DeadlineExceeded, Cancelled):
            self._abandoned_at = time.monotonic()
            return 0
        if response.received_messages:
            self.received += [m.message.data.decode() for m in response.received_messages]
            self.client.acknowledge(subscription=self.path, ack_ids=[m.ack_id for m in response.received_messages])
        return len(response.received_messages)

    def drain(self) -> int:
        # A pull we gave up on may still have been handed messages by the emulator: they come back only when
        # their ack deadline (the emulator's 10 s) has passed, and a drain before that counted them as lost.
        if self._abandoned_at is not None:
            time.sleep(max(0.0, self._abandoned_at + ACK_DEADLINE_S + 1 - time.monotonic()))
        before = len(self.received)
        self.received += [m.data.decode() for m in drain(self.path)]
        return len(self.received) - before


def test_two_runs_of_one_bridge_at_once_move_each_record_once(stack, spark_remote, tmp_path, unique, fault_report):
    name, subscription, produced, bridges = _bridge(tmp_path, unique, 20_000, SLOW)
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        _wait_for(lambda: _lease_holders(instance, name), what="the first run to take the lease")
    second = subprocess.run(command, env=env, capture_output=True, text=True)
    assert second.returncode != 0
    assert f"bridge {name} is moving a batch in run" in second.stderr
    assert first.wait(timeout=300) == 0, first.stderr.read()[-3000:]

    # Two more started at the same instant: whichever wins, nothing moves twice.
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    [run.wait(timeout=300) for run in runs]
    row = fault_report.count("two runs of one bridge at once (CLI + CLI, warm engine)", "CloudPubSubSink",
                             produced, [m.data.decode() for m in drain(subscription)])
    assert row.lost == 0 and row.duplicated == 0


def _settled_after_kill(arrived: Subscription) -> int:
    """Messages that arrive after the kill until publishing stops (two quiet 3 s windows)."""
    late, quiet = 0, 0
    while quiet < 2:
        time.sleep(3)
        got = arrived.drain()
        late, quiet = late + got, (quiet + 1 if got == 0 else 0)
    return late


def _watchdogs() -> list[int]:
    found = subprocess.run(["pgrep", "-f", "connectors/spark_watchdog.py"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


@pytest.mark.parametrize("watchdog_killed_too", [False, True], ids=["run-group-killed", "run-and-watchdog-killed"])
def test_a_killed_run_stops_moving_data_and_the_next_run_fences_it(
        stack, spark_remote, tmp_path, unique, fault_report, watchdog_killed_too):
    """The dead run's batch stops on its own once the run's lease lapses (its watchdog, when it lives, interrupts
    the job too); the next run marks the dead run failed at once (its process is gone) and moves everything not
    recorded."""
    name, subscription, produced, bridges = _bridge(tmp_path, unique, 30_000, SLOW)
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    arrived = Subscription(subscription)
    watchdogs_before = set(_watchdogs())

    def kill_the_watchdog() -> None:
        for pid in set(_watchdogs()) - watchdogs_before:
            os.kill(pid, signal.SIGKILL)

    kill_run_midway(command, env, started=lambda: arrived.pull_some() > 0,
                    before_kill=kill_the_watchdog if watchdog_killed_too else None)
    killed_at = time.monotonic()
    _settled_after_kill(arrived)  # without its watchdog too: nothing but the lease stops the orphan
    orphan_delivered = len(arrived.received)
    assert orphan_delivered < len(produced), "the orphan published the whole batch: it did not stop"

    again = subprocess.run(command, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    recovered_s = time.monotonic() - killed_at
    assert "Fenced run" in again.stderr and "is gone" in again.stderr
    # The orphan's job ended by itself: the next run found nothing of it left to interrupt.
    assert "left running by an earlier run" not in again.stderr, again.stderr[-6000:]
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        statuses = sorted(r.dagster_run.status.value for r in instance.get_run_records(RunsFilter()))
    assert statuses == [DagsterRunStatus.FAILURE.value, DagsterRunStatus.SUCCESS.value]

    arrived.drain()
    fault = ("run process group and its watchdog killed -9 mid-batch" if watchdog_killed_too
             else "run process group killed -9 mid-batch")
    row = fault_report.count(f"{fault} (warm engine)", "CloudPubSubSink", produced, arrived.received, recovered_s)
    assert row.lost == 0
    # Every duplicate is a record the dead run published before it stopped, and nothing else.
    assert row.duplicated <= orphan_delivered


def test_a_batch_killed_late_is_not_sent_again_from_its_start(stack, spark_remote, tmp_path, unique, fault_report):
    """A batch's tasks commit each part the target acknowledged to the bridge's Kafka group as they go: the run
    after a kill -9 starts there, so of what the dead run delivered only its last parts are sent again."""
    name, subscription, produced, bridges = _bridge(tmp_path, unique, 30_000, SLOW,
                                                    batch={"progress_interval_ms": 500})
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    arrived = Subscription(subscription)

    def far_enough() -> bool:
        arrived.pull_some()
        return len(arrived.received) >= 10_000

    kill_run_midway(command, env, started=far_enough)
    killed_at, before_kill = time.monotonic(), len(arrived.received)
    late = _settled_after_kill(arrived)
    again = subprocess.run(command, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    recovered_s = time.monotonic() - killed_at
    arrived.drain()
    row = fault_report.count("run process group killed -9 late in a batch, parts of 0.5 s (warm engine)",
                             "CloudPubSubSink", produced, arrived.received, recovered_s)
    assert row.lost == 0
    # Sent again from the batch's start, every record that arrived before the kill would be a duplicate; sent
    # from the last acknowledged parts, only those in flight are (about 1,500-2,300 measured: a part per task in
    # flight at the kill, and the one the orphaned tasks were delivering when they stopped).
    assert row.duplicated < before_kill / 2, (row.duplicated, before_kill, late)


def test_a_kafka_broker_restarted_mid_batch_loses_nothing_and_sends_nothing_twice(
        stack, spark_remote, tmp_path, unique, fault_report):
    """The broker stops part-way through a batch and is back within the outage timeout: the tasks' readers
    wait for it and go on, and the run succeeds with every record delivered once. 160,000 records of 1 KiB
    over 4 partitions: 40 MB a partition, more than a task's reader fetches ahead (16 MiB), so the reads
    still need the broker when it goes."""
    topic, name = f"fault-{unique}", f"fault_{unique}"
    kafka_admin().create_topic(topic, partitions=4)
    subscription = create_pubsub_topic(topic)
    produced = {f"r{i:06d}" for i in range(160_000)}
    produce(topic, [(None, f"{value} {'x' * 1000}") for value in sorted(produced)])
    bridges = sink_bridges_file(tmp_path, name, topic, batch={"max_records": 200_000, "outage_timeout_seconds": 90})
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    arrived = Subscription(subscription)
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: arrived.pull_some() > 0 or run.poll() is not None, what="the first published message")
    assert run.poll() is None, "the run finished before the broker could be stopped"
    stack.down(only=("kafka",), log=lambda line: None)
    stopped_at = time.monotonic()
    # Asked here, not after `stack.up`: the run may end as soon as the broker answers again, before `up` has seen it
    # ready (its end commits to the Connect group need the broker, so it cannot end while the broker is down).
    running_when_stopped = run.poll() is None
    try:
        time.sleep(2)
    finally:
        stack.up(only=("kafka",), log=lambda line: None)
    assert running_when_stopped, "the run finished before the broker was down: the restart was not in its middle"
    _, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    recovered_s = time.monotonic() - stopped_at
    arrived.drain()
    row = fault_report.count("Kafka broker stopped and restarted mid-batch (warm engine)", "CloudPubSubSink",
                             produced, [m.split(" ", 1)[0] for m in arrived.received], recovered_s)
    assert row.lost == 0 and row.duplicated == 0
