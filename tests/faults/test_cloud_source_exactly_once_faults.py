"""Exactly once into Kafka through faults (issue #33), the Cloud Pub/Sub source on the warm engine as Dagster runs it:
20,000 messages, the run killed -9 at three random moments while it writes, the engine's Python workers killed once,
the Kafka broker restarted once, two runs started together, then runs until done (eos_faults.py). A read_committed
consumer counts every record; with exactly.once.support=required each arrives once (the copies at-least-once
allows under the same faults are shown by the Lite source's `requested` case, test_exactly_once_faults.py). Order is not checked: Pub/Sub gives none without ordering keys,
and messages a killed run held come back later than the rest. Under `required` the same again with the bridge always
on in a host beside an at-least-once bridge that keeps moving, the messages published while the faults land
(eos_faults.inflict_faults_always_on)."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from tests.e2e.helpers import (
    cloud_source_bridges_file, create_pubsub_topic, kafka_admin, publish_pubsub_messages,
)
from tests.faults.eos_faults import committed_values, inflict_faults_on, written_to

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
MESSAGES, PARTITIONS = 20_000, 3
# Messages a killed run had pulled come back when their ack deadline (the bridge leases them for 30 s) has passed.
SETTLE_S = 180


def _publish(topic: str, values: list[str], per_second: float) -> None:
    """In chunks of 50 at about `per_second`."""
    started = time.monotonic()
    for i in range(0, len(values), 50):
        publish_pubsub_messages(topic, [(value.encode(), {}) for value in values[i:i + 50]])
        time.sleep(max(0.0, started + (i + 50) / per_second - time.monotonic()))


@pytest.mark.parametrize("mode", ["batch", "continuous"])
def test_the_cloud_source_through_kills_a_worker_kill_a_broker_restart_and_two_runs_at_once(
        stack, spark_remote, tmp_path, unique, fault_report, mode):
    name, kafka_topic, pubsub_topic = f"eos_cps_fault_{unique}", f"eos-cps-fault-{unique}", f"eos-cps-fault-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=PARTITIONS)
    subscription = create_pubsub_topic(pubsub_topic)
    produced = [f"m{i:05d}" for i in range(MESSAGES)]
    always_on = mode == "continuous"
    publishing = None
    if always_on:  # messages keep arriving while the faults land, at about 250 a second
        publishing = threading.Thread(target=_publish, args=(pubsub_topic, produced, 250), daemon=True)
        publishing.start()
    else:
        publish_pubsub_messages(pubsub_topic, [(value.encode(), {}) for value in produced])
    bridges = cloud_source_bridges_file(
        tmp_path, name, subscription, kafka_topic,
        # Short transactions: each run commits many, so the faults land between a commit and its acks too.
        {"kafka.partition.count": PARTITIONS, "exactly.once.support": "required", "transaction.boundary": "interval",
         "transaction.boundary.interval.ms": 200},
        {"max_records": 4000, "parallelism": 2, "outage_timeout_seconds": 60},
        {"stream_tasks": 2, "commit_interval_ms": 1000} if always_on else None)
    started = time.monotonic()

    def done() -> bool:
        return len(set(committed_values(kafka_topic, PARTITIONS))) >= MESSAGES

    command, env = inflict_faults_on(stack, bridges, name, tmp_path, unique, spark_remote, always_on,
                                     lambda: written_to(kafka_topic), "kafka", kill_within_s=1.0, done=done)
    settle_until = time.monotonic() + SETTLE_S
    while not always_on and not done() and time.monotonic() < settle_until:
        time.sleep(5)
        subprocess.run(command, env=env, capture_output=True, timeout=300)
    if publishing is not None:
        publishing.join(timeout=60)
    values = committed_values(kafka_topic, PARTITIONS)
    row = fault_report.count(f"exactly.once.support=required: 3 kill -9 of the run, the Python workers killed, "
                             f"the broker restarted, two runs at once (warm engine{', always on in a host' * always_on})",
                             "CloudPubSubSource", set(produced), values, time.monotonic() - started)
    assert row.lost == 0 and row.duplicated == 0
