"""Driver side of the always-on streams' Spark jobs (stream_slots.py runs their tasks): a stream's slots run in a job
of its own (`OwnJob`), or, in a run that moves several bridges (a host's), in the run's shared job (`SharedJob`)
while it is forming. Both answer a LeasedJob the same questions: alive, failure, end.

A shared job forms from the host's bridges' streams at its run's start (or from all of them again after the job ended),
and runs until its last slot has ended. A stream that opens while it
runs (a bridge switched on, a failed stream started again, a partition added) gets a job of its own: a running
Spark job takes no new tasks. The run's next start gathers them all again.
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

from connectors.kafka.stream_lease import HostBeat
from connectors.kafka.stream_slots import NOTHING_SCHEMA, SharedSlot, SlotEnds, SlotWork, run_shared, run_slots

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A shared job starts once every stream it expects has joined (or said it will not), or, forming again after the
# last one ended (lost, or its leases lapsed), once no stream has joined it for `gather_s`: its streams find the job
# gone at their next progress read, one commit interval apart at most. At the latest this long after the first joined:
_GATHER_AT_MOST_S = 60.0
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
        job = spark.range(0, slots, 1, slots).mapInArrow(functools.partial(run_slots, work), NOTHING_SCHEMA)
        self._thread = threading.Thread(target=self._run, args=(job,), name=f"stream {name}", daemon=True)
        self._thread.start()

    def _run(self, job) -> None:
        try:
            for tag in self._tags:  # tags are per thread
                self._spark.addTag(tag)
            job.collect()
        except BaseException as exc:  # noqa: BLE001 - handed to the stream by failure()
            self._failure = exc

    def alive(self) -> bool:
        return self._thread.is_alive()

    def failure(self) -> BaseException | None:
        return None if self.alive() else self._failure

    def end(self, wait_s: float) -> None:
        """After the lease told the tasks to end: waits for them, then interrupts the job (its last tag is its own)."""
        self._thread.join(wait_s)
        if self._thread.is_alive():
            self._spark.interruptTag(self._tags[-1])
            self._thread.join(wait_s)


class SharedMember:
    """One stream's part of a shared job."""

    def __init__(self, job: SharedJob, slots: list[SharedSlot]):
        first = slots[0]
        self._job, self._slots, self._stream_id = job, slots, first.stream_id
        self._ends = SlotEnds(first.client_config, first.group, first.where, len(slots))
        self._read_at = float("-inf")
        self._ended, self._failure = 0, None
        self._closed = False

    def _look(self) -> None:
        now = time.monotonic()
        if not self._closed and now - self._read_at >= _LOOK_S and self._job.launched():
            self._ended, self._failure = self._ends.read(self._stream_id)
            self._read_at = now

    def alive(self) -> bool:
        if not self._job.launched():
            return True  # still forming
        if not self._job.running():
            return False
        self._look()
        return self._failure is None and self._ended < len(self._slots)

    def failure(self) -> BaseException | None:
        if self.alive():
            return None
        if self._failure is not None:
            return self._failure
        return self._job.failure() if self._ended < len(self._slots) else None

    def end(self, wait_s: float) -> None:
        """After the lease told its slots to end: waits until they said so (a shared job is not interrupted for one
        stream; a slot that does not end stops when its lease lapses)."""
        deadline = time.monotonic() + wait_s
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._closed = True
        self._ends.close()


class SharedJob:
    """The run's shared job: `tasks` Spark tasks running the slots of every stream that joined while it formed; and
    the host's one lease beat (stream_lease.py) for all its streams, whichever job they run in."""

    def __init__(self, spark: SparkSession, host: str, tags: list[str], tasks: int, expected: set[str],
                 gather_s: float):
        self._spark, self._tags, self._tasks, self._gather_s = spark, list(tags), tasks, gather_s
        self._host = host
        self._beats: dict[str, HostBeat] = {}  # by Kafka client config
        self._lock = threading.Lock()
        self._forming: list[SharedSlot] = []
        self._expected: set[str] | None = set(expected)  # whose streams the first job waits for; None: whoever comes
        self._first_joined_at = self._joined_at = 0.0
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def join(self, bridge: str, stream_id: str, work: SlotWork, slots: int, client_config: dict, group: str,
             lease_partition: TopicPartition) -> SharedMember | None:
        """The stream's slots in the forming job; None while a job runs (the stream then runs a job of its own)."""
        with self._lock:
            if self.running():
                return None
            if self._thread is not None:  # the last one ended: a new one forms
                self._thread, self._failure = None, None
            units = [SharedSlot(stream_id, work, slot, client_config, group,
                                (lease_partition.topic, lease_partition.partition)) for slot in range(slots)]
            if not self._forming:
                self._first_joined_at = time.monotonic()
                threading.Thread(target=self._launch_when_gathered, name="shared stream job", daemon=True).start()
            self._forming += units
            self._joined_at = time.monotonic()
            if self._expected is not None:
                self._expected.discard(bridge)
            return SharedMember(self, units)

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

    def launched(self) -> bool:
        return self._thread is not None

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def failure(self) -> BaseException | None:
        return self._failure

    def _launch_when_gathered(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                gathered = not self._expected if self._expected is not None else now - self._joined_at >= self._gather_s
                if gathered or now - self._first_joined_at >= _GATHER_AT_MOST_S:
                    units, self._forming, self._expected = self._forming, [], None
                    tasks = min(self._tasks, len(units))
                    assigned = [units[i::tasks] for i in range(tasks)]
                    job = self._spark.range(0, tasks, 1, tasks).mapInArrow(
                        functools.partial(run_shared, assigned), NOTHING_SCHEMA)
                    self._thread = threading.Thread(target=self._run, args=(job,), name="shared stream job",
                                                    daemon=True)
                    self._thread.start()
                    return
            time.sleep(0.2)

    def _run(self, job) -> None:
        try:
            for tag in (*self._tags, f"shared-{uuid.uuid4().hex[:16]}"):  # tags are per thread
                self._spark.addTag(tag)
            job.collect()
        except BaseException as exc:  # noqa: BLE001 - each member hands it to its stream
            self._failure = exc
