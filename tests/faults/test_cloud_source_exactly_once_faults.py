"""Exactly once into Kafka through faults (issue #33), the Cloud Pub/Sub source on the warm engine as Dagster runs it:
20,000 messages, the run killed -9 at three random moments while it writes, the engine's Python workers killed once,
the Kafka broker restarted once, two runs started together, then runs until done (eos_faults.py). A read_committed
consumer counts every record; with exactly.once.support=required each arrives once, and with the default (requested)
the same faults show the copies at-least-once allows. Order is not checked: Pub/Sub gives none without ordering keys,
and messages a killed run held come back later than the rest."""

from __future__ import annotations

import random
import subprocess
import time

import pytest

from tests.e2e.helpers import (
    cli_run, cloud_source_bridges_file, create_pubsub_topic, kafka_admin, publish_pubsub_messages,
)
from tests.faults.eos_faults import committed_values, inflict_faults, written_to

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
MESSAGES, PARTITIONS = 20_000, 3
# Messages a killed run had pulled come back when their ack deadline (the bridge leases them for 30 s) has passed.
SETTLE_S = 180


@pytest.mark.parametrize("support", ["required", "requested"])
def test_the_cloud_source_through_kills_a_worker_kill_a_broker_restart_and_two_runs_at_once(
        stack, spark_remote, tmp_path, unique, fault_report, support):
    name, kafka_topic, pubsub_topic = f"eos_cps_fault_{unique}", f"eos-cps-fault-{unique}", f"eos-cps-fault-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=PARTITIONS)
    subscription = create_pubsub_topic(pubsub_topic)
    produced = [f"m{i:05d}" for i in range(MESSAGES)]
    publish_pubsub_messages(pubsub_topic, [(value.encode(), {}) for value in produced])
    bridges = cloud_source_bridges_file(
        tmp_path, name, subscription, kafka_topic,
        # Short transactions: each run commits many, so the faults land between a commit and its acks too.
        {"kafka.partition.count": PARTITIONS, "exactly.once.support": support, "transaction.boundary": "interval",
         "transaction.boundary.interval.ms": 200},
        {"max_records": 4000, "parallelism": 2, "outage_timeout_seconds": 60})
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    started = time.monotonic()

    def done() -> bool:
        return len(set(committed_values(kafka_topic, PARTITIONS))) >= MESSAGES

    inflict_faults(stack, command, env, tmp_path, random.Random(unique), lambda: written_to(kafka_topic), "kafka",
                   kill_within_s=1.0, done=done)
    settle_until = time.monotonic() + SETTLE_S
    while not done() and time.monotonic() < settle_until:
        time.sleep(5)
        subprocess.run(command, env=env, capture_output=True, timeout=300)
    values = committed_values(kafka_topic, PARTITIONS)
    row = fault_report.count(f"exactly.once.support={support}: 3 kill -9 of the run, the Python workers killed, "
                             "the broker restarted, two runs at once (warm engine)", "CloudPubSubSource",
                             set(produced), values, time.monotonic() - started)
    assert row.lost == 0
    if support == "required":
        assert row.duplicated == 0
