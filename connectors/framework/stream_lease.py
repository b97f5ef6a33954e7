"""The lease between a Kafka-reading bridge's run and its Spark tasks (an always-on stream's, or a batch's:
spark_read.py), kept in Kafka: the run commits a beat
(an increasing number, with the stream's id as metadata) to a group of the bridge's own every `BEAT_S`; each task
reads it back and stops, after committing what it delivered, once the beat names another stream (a newer run's,
or the run's own "stop") or has not moved for `LAPSE_S` (the run is gone: killed, or its host lost), or for
`LINKED_LAPSE_S` while the task's link to its run's process (run_liveness.py) says that process lives.

A host's run (many bridges) beats once for all of them (`HostBeat`): one commit per beat to the host's own group,
at every stream's lease partition. A hosted stream's own group then only says whose the bridge is (its stream's id,
written at its start, and "stop" at its end), and its tasks read that every `OWNER_LOOK_S`. Thirty bridges' leases
beaten apart cost the run 150 commits a second and their tasks as many reads.

Why not Spark's own cancellation: a Spark Connect server keeps executing an operation whose client died, and a
Python task is killed only after Spark's monitor notices (it looks every 2 s, then waits
spark.python.task.killTimeout): a killed run's stream went on publishing for seconds. Through the lease it stops
within `LAPSE_S`, and a terminated run's tasks end cleanly instead of being killed mid-round. A task linked to its
run's process (run_liveness.py) stops sooner: at its next look after that process is gone.
"""

from __future__ import annotations

import collections
import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from confluent_kafka import KafkaException, TopicPartition

from connectors.kafka.admin import retry_transient
from connectors.kafka.connection import group_committer
from connectors.framework.run_liveness import LivenessLink

# A stream's task stops between LAPSE_S - BEAT_S and LAPSE_S + 2 * BEAT_S after its run died (the beat it saw last,
# and its look, are each up to a beat late), then delivers what it holds: within 1 s. A batch's task looks between
# the Arrow batches it hands the target, later on a busy machine (bench.kill_stop). A run's beat may be late by up to
# LAPSE_S - BEAT_S (six beats) before its tasks take it for gone.
BEAT_S = 0.1
LAPSE_S = 0.7
# The lapse of a task linked to its run (run_liveness.py): the link tells it at once that the run's process ended, so
# a beat late while that process lives is a run paused or starved of CPU (or Kafka slow), and ending the tasks only
# adds restarts to the load. At 0.7 s, a host's run paused 1.5 s ended its thirty streams, and their restarts starved
# its beat again: a second wave of thirty (30 bridges, 2 cores). A run whose host vanished, which no link tells, or
# one stuck alive, is fenced by a newer run's beat as before; the tasks stop on their own after this long.
LINKED_LAPSE_S = 10.0
# How often a hosted stream's task reads whose the bridge is (a stop, or a newer run taking over, is seen this late).
OWNER_LOOK_S = 1.0
STOP_PREFIX = "stop:"
# How long a run waits for its lease's stop (or close) to reach Kafka. With Kafka gone a commit waited in librdkafka
# 40 s to 2 minutes whatever its timeouts said (tests/faults/test_outages.py); the tasks stop at the lapse then.
STOP_WAIT_S = 2.0

Beat = tuple[int, str]  # (offset, metadata) as committed


def lease_group(consumer_group: str) -> str:
    return f"{consumer_group}-stream-lease"


def host_lease_group(host: str) -> str:
    return f"bridge-host-{host}-stream-lease"


def source_lease_place(kafka_topic: str) -> tuple[str, int]:
    """Where a source's lease sits (a bridge that writes Kafka): partition 0 of the topic it writes, for its batches
    and its stream alike, so that whichever of them started last fences the other's tasks."""
    return (kafka_topic, 0)


@dataclass(frozen=True)
class HostBeatRef:
    """What a hosted stream's tasks watch: the host's lease group, and the id its run's beats carry."""

    group: str
    beat_id: str


class HostBeat:
    """A host run's beat for all its streams' leases (one per Kafka cluster): every `BEAT_S`, one commit of an
    increasing number at each stream's lease partition, with the run's beat id as metadata."""

    def __init__(self, client_config: dict, host: str):
        self.ref = HostBeatRef(host_lease_group(host), uuid.uuid4().hex[:16])
        self._consumer = group_committer(client_config, self.ref.group)
        self._where: collections.Counter[tuple[str, int]] = collections.Counter()
        self._beat = 0
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=_beat_until_closed, args=(self.beat, self._closed),
                                        name=f"host lease {self.ref.group}", daemon=True)
        self._thread.start()

    def add(self, where: tuple[str, int]) -> None:
        with self._lock:
            self._where[where] += 1
        self.beat()  # the stream's tasks find the beat from their first moment

    def remove(self, where: tuple[str, int]) -> None:
        with self._lock:
            self._where[where] -= 1
            if self._where[where] <= 0:
                del self._where[where]

    def beat(self) -> None:
        with self._lock:
            if self._closed.is_set() or not self._where:
                return
            self._beat += 1
            self._consumer.commit(offsets=[TopicPartition(t, p, self._beat, metadata=self.ref.beat_id)
                                           for t, p in self._where], asynchronous=False)

    def close(self) -> None:
        """Within STOP_WAIT_S (_within)."""
        _within(STOP_WAIT_S, self._close, f"closing {self.ref.group}")

    def _close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._consumer.close()


def _within(seconds: float, work: Callable[[], None], what: str) -> None:
    """Runs `work` (a stop or close that commits to Kafka) in a thread of its own and waits for it at most
    `seconds`; past that it goes on in the background, ending when librdkafka gives up. Its errors are dropped:
    with Kafka away the tasks stop at the lapse."""
    def attempt() -> None:
        with contextlib.suppress(KafkaException):
            work()

    worker = threading.Thread(target=attempt, name=what, daemon=True)
    worker.start()
    worker.join(seconds)


def _beat_until_closed(beat, closed: threading.Event) -> None:
    """A lease thread: `beat()` every BEAT_S until `closed` is set."""
    while not closed.wait(BEAT_S):
        try:
            beat()
        except KafkaException:  # Kafka away for a moment: the tasks wait LAPSE_S before they give up
            pass


class LeaseHolder:
    """The run's side: beats until `stop()` (which beats "stop" once) or `close()`; a hosted stream's lease says
    only whose the bridge is, its host beating for it."""

    def __init__(self, client_config: dict, group: str, partition: TopicPartition, stream_id: str,
                 host: HostBeat | None = None):
        self._client_config, self._group = client_config, lease_group(group)
        self._consumer = group_committer(client_config, self._group)
        self._where = (partition.topic, partition.partition)
        self._stream_id = stream_id
        self._host = host
        self._beat = 0
        self._closed = threading.Event()
        self._lock = threading.Lock()
        # The tasks find their stream's id from the first moment. Retried while the group's coordinator moves: a run
        # started just after a broker restart met NOT_COORDINATOR here (faults test of a source through an outage).
        retry_transient(self.beat)()
        if host is not None:
            # A hosted stream's lease is written at its start and its stop only: its consumer (a librdkafka client,
            # four threads, per hosted bridge) is not kept in between. Closed in the background: the streams of a
            # host's start open one after another.
            with self._lock:
                threading.Thread(target=self._consumer.close, name=f"lease {stream_id} written", daemon=True).start()
                self._consumer = None
            host.add(self._where)
        else:
            threading.Thread(target=_beat_until_closed, args=(self.beat, self._closed), name=f"stream lease {stream_id}",
                             daemon=True).start()

    def beat(self, metadata: str | None = None) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._beat += 1
            if self._consumer is None:
                self._consumer = group_committer(self._client_config, self._group)
            self._consumer.commit(offsets=[TopicPartition(*self._where, self._beat, metadata=metadata or self._stream_id)],
                                  asynchronous=False)

    def stop(self) -> None:
        """Tells the tasks to finish the round they have, commit it, and end; closes. Within STOP_WAIT_S (_within)."""
        _within(STOP_WAIT_S, self._stop, f"stopping stream lease {self._stream_id}")

    def _stop(self) -> None:
        try:
            self.beat(STOP_PREFIX + self._stream_id)
        finally:
            self._close()

    def close(self) -> None:
        """Within STOP_WAIT_S (_within)."""
        _within(STOP_WAIT_S, self._close, f"closing stream lease {self._stream_id}")

    def _close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            if self._consumer is not None:
                self._consumer.close()
        if self._host is not None:
            self._host.remove(self._where)


class LeaseWatcher:
    """A task's side: `holds()` is False once the task must stop."""

    def __init__(self, client_config: dict, group: str, partition: TopicPartition, stream_id: str,
                 host: HostBeatRef | None = None, outage_grace_s: float | None = None,
                 link: LivenessLink | None = None):
        self._link = link  # the run's connection (run_liveness.py): its close is seen before any lapse
        self._consumer = group_committer(client_config, lease_group(group))
        self._where = TopicPartition(partition.topic, partition.partition)
        self._stream_id = stream_id
        self._host = host
        # A stream's task ends once Kafka is away for LAPSE_S (the run starts it again); a batch's task, whose end
        # fails the batch, counts the lapse again from `outage_grace_s` after Kafka answers (the run's beats come
        # back a moment after its reads), and goes on through an outage as its reads do.
        self._outage_grace_s = outage_grace_s
        self._host_beats = _HostBeatReader.of(client_config, host.group) if host is not None else None
        self._host_read = -1  # the number of the host beats' read this task looked at last
        self._seen: Beat | None = None
        self._seen_at = self._looked_at = time.monotonic()
        self._owner_looked_at = float("-inf")
        self._other_run = _AtTwoLooks()  # another run's id in the bridge's own lease group
        self._other_host_run = _AtTwoLooks()  # another host run's beat id in the host's group
        self.why_not: str | None = None

    def holds(self) -> bool:
        if self.why_not is None and self._link is not None and self._link.gone():
            self.why_not = "its run is gone (the connection to the run's process closed)"
        now = time.monotonic()
        if self.why_not or now - self._looked_at < BEAT_S:
            return self.why_not is None
        self._looked_at = now
        if self._host_beats is None:
            beat = self._read_own()
            self._judge_owner(beat)
        else:
            beat, read = self._host_beats.read((self._where.topic, self._where.partition))
            fresh, self._host_read = read != self._host_read, read
            other_host = beat is not None and beat[1] != self._host.beat_id
            # At two reads in a row, as for the bridge's own lease (_judge_owner): an older host run's beat stuck in
            # an outage lands after this run's, and this run's next beat covers it.
            if fresh and beat is not None and self._other_host_run.seen(other_host):
                self.why_not = "a newer run of its host took over"
            elif not other_host and now - self._owner_looked_at >= OWNER_LOOK_S:
                self._owner_looked_at = now
                self._judge_owner(self._read_own())
        if beat is None:
            beat = self._seen  # Kafka away for a moment: only the lapse counts
            if self._outage_grace_s is not None:
                self._seen_at = now + self._outage_grace_s
        if beat != self._seen:
            self._seen, self._seen_at = beat, max(now, self._seen_at)  # the first beat after an outage keeps its grace
        lapse = LINKED_LAPSE_S if self._link is not None and self._link.linked else LAPSE_S
        if self.why_not is None and now - self._seen_at > lapse:
            if self._host_beats is not None:
                self._judge_owner(self._read_own())  # a stop is told apart from a run gone
            self.why_not = self.why_not or f"the run has not renewed its lease for {now - self._seen_at:.1f} s"
        return self.why_not is None

    def _read_own(self) -> Beat | None:
        try:
            [tp] = self._consumer.committed([self._where], timeout=LAPSE_S)
            return tp.offset, tp.metadata or ""
        except KafkaException:
            return None

    def _judge_owner(self, beat: Beat | None) -> None:
        # Another run's id must be there at two looks in a row, and another run's "stop" never counts: a commit of an
        # older run that was in flight when Kafka went away (its last beat, its stop) lands when Kafka is back, after
        # this run's first beats, and this run's next beat covers it. (A source run started just after an outage
        # failed "a newer run took over" at once that way, in a clean-clone suite.) A newer run beats on.
        if beat is None:
            return
        if beat[1] == STOP_PREFIX + self._stream_id:
            self.why_not = "the run stopped it"
        elif self._other_run.seen(beat[1] != self._stream_id and not beat[1].startswith(STOP_PREFIX)):
            self.why_not = "a newer run took over"

    def close(self) -> None:
        self._consumer.close()
        if self._host_beats is not None:
            self._host_beats.release()
        if self._link is not None:
            self._link.close()


class _AtTwoLooks:
    """Whether something was so at this look and the one before (a takeover, told apart from a stray commit)."""

    def __init__(self):
        self._last = False

    def seen(self, now: bool) -> bool:
        twice, self._last = self._last and now, now
        return twice


class _HostBeatReader:
    """The host's beats as a process's tasks read them: one thread reads every partition asked for every `BEAT_S`,
    shared by all the host's slots running in the process (a shared task runs many), and a slot takes the last read
    without waiting. (Read in a slot's own call under a lock, each read held thirty slots' rounds behind one broker
    round trip: at a fleet's start, with the broker busy, a sixth of the engine worker's samples sat in that read.)"""

    _each: dict[tuple[str, str], _HostBeatReader] = {}
    _each_lock = threading.Lock()

    def __init__(self, client_config: dict, group: str, key: tuple[str, str]):
        self._consumer = group_committer(client_config, group)
        self._key = key
        self._users = 0
        self._asked: set[tuple[str, int]] = set()
        self._beats: dict[tuple[str, int], Beat] | None = {}  # None: the last read failed
        self._started = 0  # reads started, numbered
        self._reads = 0  # the number of the read in _beats
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._start_reading(group)

    def _start_reading(self, group: str) -> None:
        threading.Thread(target=self._read_until_closed, name=f"host beats {group}", daemon=True).start()

    @classmethod
    def of(cls, client_config: dict, group: str) -> _HostBeatReader:
        key = (json.dumps(client_config, sort_keys=True, default=str), group)
        with cls._each_lock:
            reader = cls._each.get(key) or cls._each.setdefault(key, cls(client_config, group, key))
            reader._users += 1
            return reader

    def read(self, where: tuple[str, int]) -> tuple[Beat | None, int]:
        """The host's beat at `where` as last read (None: Kafka could not be read, or no beat there yet: only the
        lapse counts), and that read's number (a look that sees the number it saw before saw nothing new). A
        partition not asked for before is read at once, as the task's first look always read Kafka."""
        with self._lock:
            asked_before = where in self._asked
            self._asked.add(where)
        if not asked_before:
            self.read_now()
        with self._lock:
            return (None if self._beats is None else self._beats.get(where)), self._reads

    def _read_until_closed(self) -> None:
        while not self._closed.wait(BEAT_S):
            self.read_now()
        self._consumer.close()

    def read_now(self) -> None:
        """One read of every partition asked for (the reading thread's beat, or a task's first look). Of two reads
        at once, the later-started one's answer stays."""
        with self._lock:
            asked = [TopicPartition(t, p) for t, p in self._asked]
            self._started += 1
            number = self._started
        if not asked:
            return
        try:
            read = self._consumer.committed(asked, timeout=LAPSE_S)
            beats = {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in read if tp.offset >= 0}
        except KafkaException:
            beats = None
        with self._lock:
            if number > self._reads:
                self._beats, self._reads = beats, number

    def release(self) -> None:
        with self._each_lock:
            self._users -= 1
            if self._users > 0:
                return
            del self._each[self._key]
        self._closed.set()
