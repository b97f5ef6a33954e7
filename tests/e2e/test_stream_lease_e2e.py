"""The always-on streams' lease against the local Kafka: a host's one beat keeps every hosted stream's tasks going,
a stop reaches one stream alone, and a host run that is gone (or replaced) ends its tasks within the lapse. A batch's
tasks watch a lease too: taken by another run, they stop, committing what they delivered."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from connectors.kafka.admin import PartitionRange
from connectors.kafka.connection import KafkaConnection, group_committer
from connectors.framework.sink_tally import COUNTERS, SUMMARY_SCHEMA
from connectors.framework.spark_read import BatchProgress, deliver_offset_ranges
from connectors.framework.stream_lease import (
    LAPSE_S, OWNER_LOOK_S, HostBeat, LeaseHolder, LeaseWatcher, lease_group,
)
from tests.e2e.helpers import kafka_admin

pytestmark = pytest.mark.e2e


def _topic() -> TopicPartition:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    kafka_admin().create_topic(name, 1)
    return TopicPartition(name, 0)


def _holds_until(watcher: LeaseWatcher, seconds: float) -> float | None:
    """Seconds until the watcher let go, or None if it held for `seconds`."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if not watcher.holds():
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def test_one_host_beat_keeps_its_streams_and_a_stop_or_a_gone_host_ends_them(stack):
    config = {"bootstrap.servers": stack.env()["KAFKA_BOOTSTRAP_SERVERS"]}
    # two bridges reading one partition (their leases share it) and a third reading another
    shared, other = _topic(), _topic()
    host_name = f"test-{uuid.uuid4().hex[:6]}"
    host = HostBeat(config, host_name)
    holders, watchers = {}, {}
    for bridge, where in (("a", shared), ("b", shared), ("c", other)):
        group = f"connect-{bridge}-{uuid.uuid4().hex[:6]}"
        holders[bridge] = LeaseHolder(config, group, where, f"stream-{bridge}", host)
        watchers[bridge] = LeaseWatcher(config, group, where, f"stream-{bridge}", host.ref)
    try:
        # the host's beat alone (no stream beats its own group) keeps them all for many lapses
        assert all(_holds_until(w, 3 * LAPSE_S) is None for w in watchers.values())

        holders["a"].stop()  # a's bridge switched off: its tasks stop, b's (same partition) go on
        let_go = _holds_until(watchers["a"], 3 * LAPSE_S)
        assert let_go is not None and let_go <= OWNER_LOOK_S + 0.5
        assert watchers["a"].why_not == "the run stopped it"
        assert _holds_until(watchers["b"], 2 * LAPSE_S) is None

        # the host's run replaced by a newer one (its keeper fenced it): the old run's tasks stop at once. The fenced
        # run stops beating c's place; while both beat it, a look sees whichever beat landed last, and two beats 0.1 s
        # apart can stay in step with the looks (a clean-clone CI run saw only the old run's for 1.07 s).
        newer = HostBeat(config, host_name)
        newer.add((other.topic, other.partition))
        holders["c"].close()
        let_go = _holds_until(watchers["c"], 3 * LAPSE_S)
        assert let_go is not None and let_go <= 0.5 and watchers["c"].why_not == "a newer run of its host took over"
        newer.close()

        host.close()  # the host's run gone (killed): b stops once its beat has not moved for the lapse
        let_go = _holds_until(watchers["b"], 3 * LAPSE_S)
        assert let_go is not None and LAPSE_S - 0.3 <= let_go <= LAPSE_S + 0.5
        assert watchers["b"].why_not.startswith("the run has not renewed its lease")
    finally:
        for holder in holders.values():
            holder.close()
        for watcher in watchers.values():
            watcher.close()
        host.close()


def test_a_stream_task_linked_to_its_run_stops_when_the_run_goes_while_its_lease_is_still_beaten(stack):
    """A source stream's task (ReportingTaskSettings) links to its run's listener: the run's end is seen at the next
    look, not the lease's lapse; here the lease goes on being beaten, so only the link can have told."""
    from connectors.framework.run_liveness import RunLiveness
    from connectors.framework.stream_report import ReportingTaskSettings

    config = {"bootstrap.servers": stack.env()["KAFKA_BOOTSTRAP_SERVERS"]}
    where, group, stream_id = _topic(), f"connect-linked-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:16]
    holder = LeaseHolder(config, group, where, stream_id)
    liveness = RunLiveness(stream_id.encode(), "127.0.0.1")
    settings = ReportingTaskSettings(None, group, stream_id, (where.topic, where.partition), report_every_s=1.0,
                                     deadline=time.time() + 60, run_address=liveness.address)
    watcher = settings.lease_watcher(config)
    try:
        assert _holds_until(watcher, 2 * LAPSE_S) is None
        liveness.close()
        let_go = _holds_until(watcher, 3 * LAPSE_S)
        assert let_go is not None and let_go < LAPSE_S / 2, let_go
        assert watcher.why_not == "its run is gone (the connection to the run's process closed)"
    finally:
        watcher.close()
        holder.close()


def _slow_counting_delivery(batches, keep_going):
    """A delivery that takes 0.2 s per Arrow batch (of 2,000 records) and acknowledges everything: its summary counts
    the records."""
    counted: dict[tuple[str, int], int] = {}
    for batch in batches:
        time.sleep(0.2)
        key = (batch.column(0)[0].as_py(), batch.column(1)[0].as_py())
        counted[key] = counted.get(key, 0) + batch.num_rows
    for (topic, partition), records in counted.items():
        yield [{"topic": topic, "partition": partition, **dict.fromkeys(COUNTERS, 0), "records": records,
                "refusals": None, "landed_source": None, "landed_target": None}]


def test_a_batch_whose_lease_another_run_takes_stops_and_commits_what_it_delivered(stack, spark):
    """Another run's beat at the batch's lease: the tasks stop at their next look, commit the parts delivered to the
    bridge's group (where the next run starts) and fail the batch naming why, rather than read on to its end."""
    where = _topic()
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(200_000):
        producer.produce(where.topic, value=f"r{i}".encode(), partition=0)
        if i % 50_000 == 0:
            producer.flush(30)
    producer.flush(30)
    group = f"connect-batch-lease-{uuid.uuid4().hex[:6]}"
    config = {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]}
    connection = KafkaConnection(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"])

    batch_over = threading.Event()

    def take_the_lease() -> None:
        """Beats as a newer run would, every 20 ms from the batch's first committed part until the batch is over: the
        batch's own run, alive here, beats every 0.1 s, and a task's look sees whichever beat landed last. (A fixed
        start and length missed the batch once in a busy suite: its tasks started after the beats had ended.)"""
        progress = group_committer(config, group)
        taker = group_committer(config, lease_group(group))
        try:
            while not batch_over.is_set():  # the batch is delivering once its first part is committed
                [committed] = progress.committed([TopicPartition(where.topic, 0)], timeout=30)
                if committed.offset > 0:
                    break
                time.sleep(0.1)
            beat = 0
            while not batch_over.is_set():
                taker.commit(offsets=[TopicPartition(where.topic, 0, 10**9 + beat, metadata="newer-run")],
                             asynchronous=False)
                beat += 1
                time.sleep(0.02)
        finally:
            progress.close()
            taker.close()

    taker = threading.Thread(target=take_the_lease, daemon=True)
    taker.start()
    try:
        with pytest.raises(Exception) as failed:
            deliver_offset_ranges(spark, connection, [PartitionRange(where.topic, 0, 0, 200_000)], 30,
                                  _slow_counting_delivery, SUMMARY_SCHEMA, group,
                                  progress=BatchProgress(group, "batch-1", 0.5))
    finally:
        batch_over.set()
        taker.join(60)
    assert "a newer run took over" in str(failed.value), str(failed.value)[-2000:]

    progress = Consumer({**config, "group.id": group, "log_level": 3})
    [committed] = progress.committed([TopicPartition(where.topic, 0)], timeout=30)
    progress.close()
    assert 0 < committed.offset < 200_000, committed.offset
