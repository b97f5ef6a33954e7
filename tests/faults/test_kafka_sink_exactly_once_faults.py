"""Exactly once into Kafka through faults (issue #33), the Kafka sink (Kafka -> Kafka) on the warm engine as Dagster
runs it: 20,000 records, the run killed -9 at three random moments while it writes, the engine's Python workers
killed once, the target cluster's broker restarted once (the transactions live there), two runs started together,
then runs until done (eos_faults.py). A read_committed consumer of the target counts every record; with
exactly.once.support=required each arrives once and in its source partition's order (the copies at-least-once
allows under the same faults are shown by the Lite source's `requested` case, test_exactly_once_faults.py). Under `required` the same again with the bridge
always on in a host beside an at-least-once bridge that keeps moving, the records arriving while the faults land
(eos_faults.inflict_faults_always_on)."""

from __future__ import annotations

import os
import threading
import time

import pytest
import yaml
from confluent_kafka import Producer

from tests.e2e.helpers import kafka_admin, read_committed
from tests.e2e.test_kafka_sink_e2e import _target
from tests.faults.eos_faults import inflict_faults_on

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
RECORDS, PARTITIONS = 20_000, 3


def _written_on_target(topic: str) -> int:
    """Records on the target, committed or not (a transaction's records count as soon as they are written)."""
    target = _target()
    partitions = target.partitions([topic]).get(topic)
    return sum(target.end_offsets({topic: partitions})[topic].values()) if partitions else 0


def _records(topic: str) -> list[tuple[int, str, int]]:
    """(partition, value, offset) of every record a read_committed consumer of the target sees, in each partition's
    order."""
    return [(m.partition(), m.value().decode(), m.offset())
            for m in read_committed(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], topic, PARTITIONS, 3)]


def _source_places(topic: str) -> dict[int, list[int]]:
    """Each source partition's places, in its log's order."""
    places: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for m in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], topic, PARTITIONS, 3):
        places[m.partition()].append(int(m.value().decode()[3:]))
    return places


def _runs(places: list[tuple[int, int]]) -> str:
    """A partition's (place, target offset) pairs as runs of consecutive places: "0-1514 @3-1517, 1515 @1519"."""
    runs: list[list[int]] = []  # [first place, last place, first offset, last offset]
    for place, offset in places:
        if runs and place == runs[-1][1] + 1:
            runs[-1][1], runs[-1][3] = place, offset
        else:
            runs.append([place, place, offset, offset])
    return ", ".join(f"{a}-{b} @{c}-{d}" if a != b else f"{a} @{c}" for a, b, c, d in runs)


def _produce(topic: str, values: list[str], per_second: float | None = None) -> None:
    """Each value to its partition ("p1:..." to 1). Idempotent, so that the source partitions hold them in that
    order: a plain producer's retries reordered them once (a partition's last 490 records first, as its log showed;
    the bridge copied that order faithfully and this test took it for the bridge's). `per_second`: at that rate."""
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3,
                         "linger.ms": 20, "enable.idempotence": True})
    started = time.monotonic()
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=int(value[1]))
        producer.poll(0)
        if per_second and i % 50 == 49:
            time.sleep(max(0.0, started + (i + 1) / per_second - time.monotonic()))
    assert producer.flush(60) == 0


@pytest.mark.parametrize("mode", ["batch", "continuous"])
def test_the_kafka_sink_through_kills_a_worker_kill_a_target_broker_restart_and_two_runs_at_once(
        stack, spark_remote, tmp_path, unique, fault_report, mode):
    name, topic = f"eos_repl_fault_{unique}", f"eos-repl-fault-{unique}"
    kafka_admin().create_topic(topic, partitions=PARTITIONS)
    # Values say their partition and their place in it: "p1:01234".
    produced = [f"p{i % PARTITIONS}:{i // PARTITIONS:05d}" for i in range(RECORDS)]
    sending = None
    if mode == "batch":
        _produce(topic, produced)
    else:  # always on: records keep arriving while the faults land, at about 250 a second
        sending = threading.Thread(target=_produce, args=(topic, produced, 250), daemon=True)
        sending.start()
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "KafkaSinkConnector", "mode": mode,
        # Small batches in short parts: each run writes in several transactions, so the faults land between them.
        "batch": {"max_records": 3000, "outage_timeout_seconds": 60, "progress_interval_ms": 200},
        "continuous": {"commit_interval_ms": 1000},
        "config": {"topics": topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
                   "exactly.once.support": "required"}}]}))
    started = time.monotonic()
    always_on = mode == "continuous"
    inflict_faults_on(stack, str(bridges), name, tmp_path, unique, spark_remote, always_on,
                      lambda: _written_on_target(topic), "kafka_target", kill_within_s=0.5,
                      done=lambda: len({value for _, value, _ in _records(topic)}) >= RECORDS)
    if sending is not None:
        sending.join(timeout=60)
    records = _records(topic)
    row = fault_report.count(f"exactly.once.support=required: 3 kill -9 of the run, the Python workers killed, "
                             f"the target broker restarted, two runs at once (warm engine{', always on in a host' * always_on})",
                             "KafkaSink",
                             set(produced), [value for _, value, _ in records], time.monotonic() - started)
    assert row.lost == 0 and row.duplicated == 0
    # In order per partition, in the partition it came from (target.partition=same).
    assert all(value.startswith(f"p{partition}:") for partition, value, _ in records)
    source = _source_places(topic)
    for partition in range(PARTITIONS):
        places = [(int(value[3:]), offset) for p, value, offset in records if p == partition]
        assert [place for place, _ in places] == source[partition], \
            f"target partition {partition} not in its source's order: {_runs(places)}"
