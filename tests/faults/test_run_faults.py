"""Faults around a run of the Cloud Pub/Sub sink on the warm engine (Spark Connect), as Dagster runs it:
two runs of one bridge at once, the run's process group killed mid-batch (with and without its
watchdog), and the engine's Python workers killed mid-batch. Every record carries a unique id."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from google.cloud import pubsub_v1

from jobs.lease import pool_name
from tests.e2e.helpers import cli_run, create_pubsub_topic, drain, kafka_admin, produce, sink_bridges_file

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

# One message per publish request: a batch of this many records takes tens of seconds, long enough to
# be hit part-way through.
SLOW = {"maxBufferSize": "1"}


def _bridge(tmp_path: Path, unique: str, records: int, keys: dict | None = None) -> tuple[str, str, set[str], str]:
    topic, name = f"fault-{unique}", f"fault_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    produced = {f"r{i}" for i in range(records)}
    produce(topic, [(None, value) for value in sorted(produced)])
    return name, subscription, produced, sink_bridges_file(tmp_path, name, topic, keys)


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

    def pull_some(self) -> int:
        response = self.client.pull(subscription=self.path, max_messages=1000, timeout=5)
        if response.received_messages:
            self.received += [m.message.data.decode() for m in response.received_messages]
            self.client.acknowledge(subscription=self.path, ack_ids=[m.ack_id for m in response.received_messages])
        return len(response.received_messages)

    def drain(self) -> int:
        before = len(self.received)
        self.received += [m.data.decode() for m in drain(self.path)]
        return len(self.received) - before


def test_two_runs_of_one_bridge_at_once_move_each_record_once(stack, spark_remote, tmp_path, unique, fault_report):
    name, subscription, produced, bridges = _bridge(tmp_path, unique, 20_000, SLOW)
    command, env = cli_run(tmp_path, bridges, name, spark_remote)
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
