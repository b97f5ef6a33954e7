"""Driver side of the always-on streams' Spark jobs (stream_slots.py runs their tasks): a stream's slots run in a job
of its own (`OwnJob`), or, in a run that moves several bridges (a host's), in one of the run's shared jobs
(`SharedJob`). Both answer a LeasedJob the same questions: alive, failure, end.

A running Spark job takes no new tasks, so the shared job is launched in turns (`_Launch`): the first forms from the
host's bridges' streams at its run's start; a stream that opens while it runs (a bridge switched on, a failed stream
started again, a partition added) forms the next one with whichever others open within `_LATE_GATHER_S` of it, so
that bridges switched on together share a job's tasks and Python workers instead of a job each. The run's next start
gathers them all into one again.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import threading
import time
import uuid
from typing import TYPE_CHECKING, Iterator

from confluent_kafka import TopicPartition

from connectors.framework.stream_lease import HostBeat
from connectors.framework.stream_slots import ENDED_SCHEMA, SharedSlot, SlotEnds, SlotWork, run_shared, run_slots

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A shared job starts once every stream it expects has joined (or said it will not), or, forming again after the
# last one ended (lost, or its leases lapsed), once no stream has joined it for `gather_s`: its streams find the job
# gone at their next progress read, one commit interval apart at most. At the latest this long after the first joined:
_GATHER_AT_MOST_S = 60.0
# A launch formed while another runs starts once no stream has joined it for this long: streams switched on together
# open within it (a stream takes up to about a second to open, and the run read its switches every second then: at
# one second, three bridges switched on at once by `bridgectl bridges start` took two launches), and a stream started
# again (failed, or its partitions changed) waits no longer than this.
_LATE_GATHER_S = 3.0
# How often a member of a shared job reads its slots' ends from Kafka (a read per slot: thirty members' reads add up).
_LOOK_S = 1.0

_current: contextvars.ContextVar[SharedJob | None] = contextvars.ContextVar("shared_stream_job", default=None)


def current_shared_job() -> SharedJob | None:
    return _current.get()


@contextlib.contextmanager
def joining(shared: SharedJob | None) -> Iterator[None]:
    """Streams opened inside (in this thread) join `shared` while it forms."""
    token = _current.set(shared)
    try:
        yield
    finally:
        _current.reset(token)


class OwnJob:
    """`slots` of `work` as one task each, in a thread running the job."""

    def __init__(self, spark: SparkSession, work: SlotWork, slots: int, tags: tuple[str, ...], name: str):
        self._spark, self._tags = spark, tags
        self._failure: BaseException | None = None
        self._why: str | None = None
        job = spark.range(0, slots, 1, slots).mapInArrow(functools.partial(run_slots, work), ENDED_SCHEMA)
        self._thread = threading.Thread(target=self._run, args=(job,), name=f"stream {name}", daemon=True)
        self._thread.start()

    def _run(self, job) -> None:
        try:
            for tag in self._tags:  # tags are per thread
                self._spark.addTag(tag)
            self._why = next((row.why for row in job.collect() if row.why), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the stream by failure()
            self._failure = exc

    def alive(self) -> bool:
        return self._thread.is_alive()

    def failure(self) -> BaseException | None:
        return None if self.alive() else self._failure

    def ended_because(self) -> str | None:
        """Why its slots' leases ended them, once it ended without failing (None: not said)."""
        return None if self.alive() else self._why

    def end(self, wait_s: float) -> None:
        """After the lease told the tasks to end: waits for them, then interrupts the job (its last tag is its own)."""
        self._thread.join(wait_s)
        if self._thread.is_alive():
            self._spark.interruptTag(self._tags[-1])
            self._thread.join(wait_s)


class SharedMember:
    """One stream's part of a shared job's launch."""

    def __init__(self, launch: _Launch, slots: list[SharedSlot]):
        first = slots[0]
        self._launch, self._slots, self._stream_id = launch, slots, first.stream_id
        self._ends = SlotEnds(first.client_config, first.group, first.where, len(slots))
        self._read_at = float("-inf")
        self._ended, self._failure, self._why = 0, None, None
        self._closed = False
        self._last_look_done = False

    def _look(self, last: bool = False) -> None:
        now = time.monotonic()
        if self._closed or not self._launch.launched() or self._last_look_done:
            return
        if last or now - self._read_at >= _LOOK_S:
            self._ended, self._failure, self._why = self._ends.read(self._stream_id)
            self._read_at = now
            self._last_look_done = last

    def alive(self) -> bool:
        if not self._launch.launched():
            return True  # still forming
        if not self._launch.running():
            # The launch ended: one last look for what its slots posted (a slot's error is why its stream ended,
            # and a launch can end between two looks).
            self._look(last=True)
            return False
        self._look()
        return self._failure is None and self._ended < len(self._slots)

    def failure(self) -> BaseException | None:
        if self.alive():
            return None
        if self._failure is not None:
            return self._failure
        return self._launch.failure if self._ended < len(self._slots) else None

    def ended_because(self) -> str | None:
        """Why its slots' leases ended them, once it is not alive and did not fail (None: not said)."""
        return None if self.alive() else self._why

    def end(self, wait_s: float) -> None:
        """After the lease told its slots to end: waits until they said so (a shared job is not interrupted for one
        stream; a slot that does not end stops when its lease lapses)."""
        deadline = time.monotonic() + wait_s
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._closed = True
        self._ends.close()


class _Launch:
    """One turn of a shared job: the slots that joined while it formed, then the Spark job running them."""

    def __init__(self) -> None:
        self.units: list[SharedSlot] = []
        self.first_joined_at = self.joined_at = time.monotonic()
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None

    def launched(self) -> bool:
        return self.thread is not None

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class SharedJob:
    """The run's shared job: launches of `tasks` Spark tasks (at most) each, running the slots of the streams that
    joined while it formed; and the host's one lease beat (stream_lease.py) for all its streams."""

    def __init__(self, spark: SparkSession, host: str, tags: list[str], tasks: int, expected: set[str],
                 gather_s: float):
        self._spark, self._tags, self._tasks, self._gather_s = spark, list(tags), tasks, gather_s
        self._host = host
        self._beats: dict[str, HostBeat] = {}  # by Kafka client config
        self._lock = threading.Lock()
        self._forming: _Launch | None = None
        self._launched: list[_Launch] = []  # the launches started (those that ended are dropped at the next)
        self._expected: set[str] | None = set(expected)  # whose streams the first launch waits for; None: whoever comes

    def join(self, bridge: str, stream_id: str, work: SlotWork, slots: int, client_config: dict, group: str,
             lease_partition: TopicPartition) -> SharedMember:
        """The stream's slots in the forming launch (a new one if none is forming)."""
        with self._lock:
            units = [SharedSlot(stream_id, work, slot, client_config, group,
                                (lease_partition.topic, lease_partition.partition)) for slot in range(slots)]
            if self._forming is None:
                self._forming = _Launch()
                threading.Thread(target=self._launch_when_gathered, args=(self._forming,), name="shared stream job",
                                 daemon=True).start()
            launch = self._forming
            launch.units += units
            launch.joined_at = time.monotonic()
            if self._expected is not None:
                self._expected.discard(bridge)
            return SharedMember(launch, units)

    def host_beat(self, client_config: dict) -> HostBeat:
        """The host's beat on the Kafka cluster of `client_config`, started the first time it is asked for."""
        key = json.dumps(client_config, sort_keys=True, default=str)
        with self._lock:
            if key not in self._beats:
                self._beats[key] = HostBeat(client_config, self._host)
            return self._beats[key]

    def close(self) -> None:
        """The run ends: its beats stop (any stream still running lapses)."""
        with self._lock:
            beats, self._beats = list(self._beats.values()), {}
        for beat in beats:
            beat.close()

    def withdraw(self, bridge: str) -> None:
        """`bridge`'s stream will not join (it failed to open, or was switched off first)."""
        with self._lock:
            if self._expected is not None:
                self._expected.discard(bridge)

    def _gathered(self, launch: _Launch, now: float) -> bool:
        if self._expected is not None:  # the run's first: every stream expected has joined or withdrawn
            return not self._expected
        if any(other.running() for other in self._launched):  # latecomers beside a running launch
            return now - launch.joined_at >= _LATE_GATHER_S
        # forming again after every launch ended: its streams find theirs gone one commit interval apart at most
        return now - launch.joined_at >= self._gather_s

    def _launch_when_gathered(self, launch: _Launch) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                if self._gathered(launch, now) or now - launch.first_joined_at >= _GATHER_AT_MOST_S:
                    self._forming, self._expected = None, None
                    tasks = min(self._tasks, len(launch.units))
                    assigned = [launch.units[i::tasks] for i in range(tasks)]
                    job = self._spark.range(0, tasks, 1, tasks).mapInArrow(
                        functools.partial(run_shared, assigned), ENDED_SCHEMA)
                    launch.thread = threading.Thread(target=self._run, args=(launch, job), name="shared stream job",
                                                     daemon=True)
                    self._launched = [other for other in self._launched if other.running()] + [launch]
                    launch.thread.start()
                    return
            time.sleep(0.2)

    def _run(self, launch: _Launch, job) -> None:
        try:
            for tag in (*self._tags, f"shared-{uuid.uuid4().hex[:16]}"):  # tags are per thread
                self._spark.addTag(tag)
            job.collect()
        except BaseException as exc:  # noqa: BLE001 - each member hands it to its stream
            launch.failure = exc
