"""When a lease watcher lets go (stream_lease.LeaseWatcher), with a stand-in for Kafka's committed offsets and a
clock of the test's own: a stream's task goes once Kafka is away for the lapse; a batch's goes on through the outage
and counts the lapse again from its grace after Kafka answers; both go once the beat stops moving."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from connectors.framework import spark_read, stream_lease
from connectors.framework.stream_lease import BEAT_S, LAPSE_S, HostBeatRef, LeaseWatcher


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Group:
    """The lease group's committed beat, as the watcher's consumer reads it; `away` makes reads fail."""

    def __init__(self):
        self.beat, self.metadata, self.away = 1, "run-1", False

    def committed(self, partitions, timeout):
        if self.away:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return [TopicPartition(partitions[0].topic, partitions[0].partition, self.beat, metadata=self.metadata)]

    def close(self):
        pass


@pytest.fixture
def kafka(monkeypatch) -> tuple[_Group, _Clock]:
    group, clock = _Group(), _Clock()
    monkeypatch.setattr(stream_lease, "group_committer", lambda config, name: group)
    monkeypatch.setattr(stream_lease.time, "monotonic", clock)
    return group, clock


def _watch(group: _Group, clock: _Clock, watcher: LeaseWatcher, seconds: float, beating: bool) -> float | None:
    """Looks every BEAT_S for `seconds` (the run beating or not), the host's beats read before each look: when the
    watcher let go, or None."""
    started = clock.now
    while clock.now - started < seconds:
        clock.now += BEAT_S
        if beating and not group.away:
            group.beat += 1
        if watcher._host_beats is not None:
            watcher._host_beats.read_now()
        if not watcher.holds():
            return clock.now - started
    return None


def test_a_streams_task_lets_go_once_kafka_is_away_for_the_lapse(kafka):
    group, clock = kafka
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1")
    assert _watch(group, clock, watcher, 5, beating=True) is None
    group.away = True
    let_go = _watch(group, clock, watcher, 5, beating=True)
    assert let_go is not None and let_go <= LAPSE_S + BEAT_S
    assert watcher.why_not.startswith("the run has not renewed its lease")


def test_a_batchs_task_goes_on_through_an_outage_and_waits_its_grace_for_the_beat(kafka):
    group, clock = kafka
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", outage_grace_s=5.0)
    group.away = True
    assert _watch(group, clock, watcher, 30, beating=True) is None  # the run's reads wait for Kafka too
    group.away = False
    # Kafka answers, the run's beats not yet back: the grace, then the lapse
    let_go = _watch(group, clock, watcher, 10, beating=False)
    assert let_go is not None and 5.0 + LAPSE_S - BEAT_S <= let_go <= 5.0 + LAPSE_S + 2 * BEAT_S
    # beats back within the grace: it holds on
    group.away = True
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", outage_grace_s=5.0)
    assert _watch(group, clock, watcher, 3, beating=False) is None
    group.away = False
    assert _watch(group, clock, watcher, 3, beating=False) is None
    assert _watch(group, clock, watcher, 10, beating=True) is None


def test_a_batchs_task_lets_go_at_once_when_another_run_takes_the_lease(kafka):
    group, clock = kafka
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", outage_grace_s=5.0)
    assert _watch(group, clock, watcher, 2, beating=True) is None
    group.metadata = "run-2"
    assert _watch(group, clock, watcher, 2, beating=True) == pytest.approx(2 * BEAT_S)  # seen at two looks
    assert watcher.why_not == "a newer run took over"


def test_an_older_runs_late_beat_or_stop_does_not_take_the_lease(kafka):
    """A commit of an older run that was in flight when Kafka went away lands after this run's beats once Kafka is
    back; this run's next beat covers it."""
    group, clock = kafka
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", outage_grace_s=5.0)
    assert _watch(group, clock, watcher, 1, beating=True) is None
    for late in ("run-0", "stop:run-0"):
        group.metadata = late
        clock.now += BEAT_S
        assert watcher.holds()
        group.metadata, group.beat = "run-1", group.beat + 1
        assert _watch(group, clock, watcher, 1, beating=True) is None
    group.metadata = "stop:run-0"  # another run's stop never fences, however long it stays
    assert _watch(group, clock, watcher, 0.5, beating=True) is None
    group.metadata = "stop:run-1"
    assert _watch(group, clock, watcher, 1, beating=True) == pytest.approx(BEAT_S)
    assert watcher.why_not == "the run stopped it"


def test_an_older_host_runs_late_beat_does_not_end_a_hosted_task_and_a_newer_host_run_does(monkeypatch):
    """The host's beat group meets the same stray as a bridge's own lease: an older host run's beat, in flight when
    Kafka went away, lands after this host run's beats; a newer host run's beats, seen at two looks, end the task."""
    own, host, clock = _Group(), _Group(), _Clock()
    host.metadata = "host-run-1"
    groups = {stream_lease.lease_group("g"): own, stream_lease.host_lease_group("h"): host}
    monkeypatch.setattr(stream_lease, "group_committer", lambda config, name: groups[name])
    monkeypatch.setattr(stream_lease.time, "monotonic", clock)
    monkeypatch.setattr(stream_lease._HostBeatReader, "_start_reading", lambda reader, group: None)  # _watch reads
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", HostBeatRef(stream_lease.host_lease_group("h"),
                                                                                 "host-run-1"))
    try:
        assert _watch(host, clock, watcher, 2, beating=True) is None
        host.metadata = "host-run-0"  # the late beat of the host run before
        watcher._host_beats.read_now()
        for _ in range(3):  # looked at again and again before the next read: still one sighting
            clock.now += BEAT_S
            assert watcher.holds()
        host.metadata = "host-run-1"
        assert _watch(host, clock, watcher, 2, beating=True) is None
        host.metadata = "host-run-2"  # a newer host run beats on
        assert _watch(host, clock, watcher, 2, beating=True) == pytest.approx(2 * BEAT_S)
        assert watcher.why_not == "a newer run of its host took over"
    finally:
        watcher.close()


def test_a_hosted_tasks_look_does_not_wait_for_the_host_beats_read_in_flight(monkeypatch):
    """Thirty slots of a shared task look at the host's beats; one read of Kafka at a time, on the reader's own
    thread: a look while Kafka is slow to answer takes the last read instead of waiting for the next."""
    answer = threading.Event()

    class _SlowHost(_Group):
        def committed(self, partitions, timeout):
            answer.wait(5)
            return super().committed(partitions, timeout)

    own, host = _Group(), _SlowHost()
    host.metadata = "host-run-1"
    groups = {stream_lease.lease_group("g"): own, stream_lease.host_lease_group("h"): host}
    monkeypatch.setattr(stream_lease, "group_committer", lambda config, name: groups[name])
    monkeypatch.setattr(stream_lease._HostBeatReader, "_start_reading", lambda reader, group: None)
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", HostBeatRef(stream_lease.host_lease_group("h"),
                                                                                 "host-run-1"))
    reader = watcher._host_beats
    try:
        answer.set()
        assert reader.read(("t", 0)) == ((1, "host-run-1"), 1)  # asked for the first time: read at once
        answer.clear()
        host.beat = 2
        slow = threading.Thread(target=reader.read_now)
        slow.start()
        started = time.monotonic()
        assert reader.read(("t", 0)) == ((1, "host-run-1"), 1)  # the last read, at once
        assert time.monotonic() - started < 1
        answer.set()
        slow.join(5)
        assert reader.read(("t", 0)) == ((2, "host-run-1"), 2)
    finally:
        answer.set()
        watcher.close()


class _Lease:
    def __init__(self, holds_for: int):
        self.looks, self.holds_for = 0, holds_for

    def holds(self) -> bool:
        self.looks += 1
        return self.looks <= self.holds_for


def test_a_batchs_records_end_at_the_first_look_that_finds_the_lease_gone():
    batches = [pa.record_batch({"offset": [i]}) for i in range(10)]
    leased = spark_read._while_leased(iter(batches), _Lease(holds_for=3).holds)
    assert [b.column(0)[0].as_py() for b in leased] == [0, 1, 2, 3]
    assert len(list(spark_read._while_leased(iter(batches), _Lease(holds_for=100).holds))) == 10


class _Link:
    """A task's link to its run (run_liveness.LivenessLink): connected or not, the run's process alive or gone."""

    def __init__(self, linked: bool):
        self.linked, self.ended = linked, False

    def gone(self) -> bool:
        return self.linked and self.ended

    def close(self) -> None:
        pass


def test_a_task_linked_to_its_live_run_rides_out_late_beats_and_stops_at_once_when_the_run_goes(kafka):
    """A run paused or starved of CPU beats late while its process lives: a linked task waits the linked lapse, not
    the 0.7 s that made a paused host run's thirty streams restart (and starve its beat again); the run's end is
    still seen at once through the link, and a task whose link never connected goes by the short lapse."""
    group, clock = kafka
    link = _Link(linked=True)
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", link=link)
    assert _watch(group, clock, watcher, 1, beating=True) is None
    assert _watch(group, clock, watcher, stream_lease.LINKED_LAPSE_S - 1, beating=False) is None  # a paused run
    assert _watch(group, clock, watcher, 1, beating=True) is None  # its beats are back
    let_go = _watch(group, clock, watcher, 30, beating=False)
    assert let_go is not None and let_go <= stream_lease.LINKED_LAPSE_S + 2 * BEAT_S
    assert watcher.why_not.startswith("the run has not renewed its lease")

    link = _Link(linked=True)
    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", link=link)
    link.ended = True
    assert _watch(group, clock, watcher, 1, beating=True) == pytest.approx(BEAT_S)
    assert watcher.why_not.startswith("its run is gone")

    watcher = LeaseWatcher({}, "g", TopicPartition("t", 0), "run-1", link=_Link(linked=False))
    let_go = _watch(group, clock, watcher, 5, beating=False)
    assert let_go is not None and let_go <= LAPSE_S + 2 * BEAT_S
