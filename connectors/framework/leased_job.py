"""The long-running Spark job of an always-on bridge (continuous mode), whatever it moves: run in a thread of the
run, its tasks held on a lease through Kafka (stream_lease.py), started again after a failure.

The job's Spark work carries the run's tags (so the run's watchdog and the next run's leftover check reach it)
and one of its own, by which it is interrupted should its tasks not end through the lease. A connector's stream
subclasses this: `_start()` builds and launches its job, `progress()` reads what the tasks reported.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import TYPE_CHECKING, Callable

from confluent_kafka import TopicPartition

from connectors.errors import is_record_refused, root_cause
from connectors.framework.run_liveness import RunLiveness
from connectors.framework.stream_jobs import OwnJob, SharedJob, SharedMember, current_shared_job
from connectors.framework.stream_lease import HostBeatRef, LeaseHolder
from connectors.framework.stream_slots import SlotWork

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connectors.plugin import Bridge
    from connectors.plugin import BatchReport

# A task ends on its own this long after the run's own end, should the run's interrupt never reach it.
_TASK_GRACE_S = 60
# Restarts of a failed job in a row, with nothing moved in between, before the run fails with the job's error.
_RESTARTS = 3
# How long stopping waits for the tasks to end through the lease, and then for the job to go after interrupting it.
_STOP_WAIT_S = 10
# How the warning of a restart after a failure begins (the run records the bridge as failing until it delivers).
RESTARTED = "the stream failed and started again from its last commit"
# How the warning of a restart of a stuck job begins.
STALLED = "the stream moved nothing"
# What a job that has moved nothing yet may take more than the stall limit: the first job of a cold engine starts its
# Python workers, on a busy machine in more than the limit.
_START_ALLOWANCE_S = 120


class LeasedJob:
    """The job part of a `connectors.plugin.Stream`: subclasses implement `_start()` and `progress()`, and call
    `_progress_made()` when the tasks reported something new."""

    def __init__(self, spark: SparkSession, bridge: Bridge, lease_client_config: dict):
        self._spark, self._bridge = spark, bridge
        self._lease_client_config = lease_client_config
        self._run_tags = sorted(spark.getTags())
        # time.time() at which the tasks end on their own (they may run on another host: no monotonic clock)
        self.deadline = time.time() + bridge.continuous.max_run_minutes * 60 + _TASK_GRACE_S
        self._stopped = False
        self._restarts_without_progress = 0
        self._moved_at = time.monotonic()  # when the job last moved something, started, or had nothing to move
        self._moved_since_launch = False
        self._lease: LeaseHolder | None = None
        self._job: OwnJob | SharedMember | None = None
        self._tasks = 0  # the running job's tasks (slots) of this stream
        # The run's shared job of always-on streams (a host's), if the run has one: taken by the thread opening
        # the stream.
        self._shared: SharedJob | None = current_shared_job()
        # In a host's run its one beat keeps the tasks' lease (stream_lease.py), whichever job they run in.
        self._host_beat = self._shared.host_beat(lease_client_config) if self._shared else None
        self.stream_id = ""
        # The socket the stream's tasks hold a connection to while the stream runs (run_liveness.py).
        self._liveness: RunLiveness | None = None

    def _start(self) -> None:
        raise NotImplementedError

    def _new_stream_id(self) -> str:
        """A new id for the job about to start: its tasks' reports carry it, so earlier runs' are told apart. The run
        listens for the job's tasks (`run_address`) from now until the job is ended."""
        self._close_liveness()
        self.stream_id = uuid.uuid4().hex[:16]
        self._liveness = RunLiveness.or_none(self.stream_id.encode())
        return self.stream_id

    @property
    def run_address(self) -> tuple[str, int] | None:
        """Where the running job's tasks link to this run (run_liveness.py); None: they go by the lease alone."""
        return self._liveness.address if self._liveness is not None else None

    def _close_liveness(self) -> None:
        if self._liveness is not None:
            self._liveness.close()
            self._liveness = None

    @property
    def host_lease(self) -> HostBeatRef | None:
        """What the tasks watch besides the bridge's own lease group: the host's beat, if the run is a host's."""
        return self._host_beat.ref if self._host_beat is not None else None

    def _launch(self, work: SlotWork, slots: int, lease_partition: TopicPartition) -> None:
        """Beats the lease for `stream_id` at `lease_partition` and runs `slots` of `work` (which watch that lease):
        in the run's shared job if it has one, else in a job of its own."""
        if self._lease is not None:
            self._lease.close()
        self._lease = LeaseHolder(self._lease_client_config, self._bridge.consumer_group, lease_partition,
                                  self.stream_id, self._host_beat)
        self._tasks = slots
        self._moved_at, self._moved_since_launch = time.monotonic(), False
        bridge = self._bridge
        if self._shared is not None:
            self._job = self._shared.join(bridge.name, self.stream_id, work, slots, self._lease_client_config,
                                          bridge.consumer_group, lease_partition)
        else:
            self._job = OwnJob(self._spark, work, slots, (*self._run_tags, f"stream-{self.stream_id}"), bridge.name)

    @property
    def _running(self) -> bool:
        return self._job is not None and self._job.alive() and not self._stopped

    def _end_job(self) -> None:
        """Tells the tasks, through the lease, to report what they delivered and end; interrupts the job if they
        have not within `_STOP_WAIT_S`."""
        # The closed connection tells the tasks at their next look; the lease's stop tells those that have no
        # connection (with Kafka away they stop when the lease lapses, or are interrupted).
        self._lease.stop()
        self._close_liveness()
        self._job.end(_STOP_WAIT_S)

    def _start_again(self, take_last_reports: Callable[[], None] = lambda: None) -> None:
        """Ends the running job and starts it again from where it got to: `take_last_reports` reads what the ended
        job reported last (its final commits), before the position the new one starts from is read."""
        self._end_job()
        take_last_reports()
        self._start()

    def _with_stream_facts(self, report: BatchReport, restarted: str | None, line: str | None = None) -> BatchReport:
        """A progress report with what every stream adds: its task count (`stream_tasks`, so the asset shows the
        parallelism the stream runs at) and the warning of a restart, if there was one."""
        return dataclasses.replace(report, values={**report.values, "stream_tasks": self._tasks},
                                   line=report.line if line is None else line,
                                   warnings=(*report.warnings, restarted) if restarted else report.warnings)

    def _progress_made(self) -> None:
        self._restarts_without_progress = 0
        self._moved_at, self._moved_since_launch = time.monotonic(), True

    @property
    def _stall_limit_s(self) -> float:
        """How long a job may move nothing while records wait for it: a round held up by its destination fails
        its task within about two outage timeouts (one call, then its retries), so longer is a task stuck where no
        deadline of ours reaches."""
        return 2 * self._bridge.batch.outage_timeout_seconds + self._bridge.continuous.commit_interval_ms / 1000

    def _restart_if_stalled(self, waiting: int, records_wait: Callable[[], bool]) -> str | None:
        """A running job that moved nothing for `_stall_limit_s` (before its first move, _START_ALLOWANCE_S more) while
        `waiting` offsets are ahead of it, and `records_wait()` confirms records there (not only transaction markers),
        is ended and started again from its last report, as a failed one is (and counts as such: after `_RESTARTS`
        in a row with nothing moved the run fails, saying so). Returns the warning to show, if restarted."""
        now = time.monotonic()
        if waiting <= 0 or not self._running:
            self._moved_at = now
            return None
        stalled_s = now - self._moved_at
        if stalled_s < self._stall_limit_s + (0 if self._moved_since_launch else _START_ALLOWANCE_S):
            return None
        if not records_wait():
            self._moved_at = now  # only markers ahead: idle, looked at again after another limit
            return None
        said = f"{STALLED} for {stalled_s:.0f} s with {waiting} records waiting"
        if self._restarts_without_progress >= _RESTARTS:
            self._end_job()
            self._stopped = True
            raise RuntimeError(f"{said} (bridge {self._bridge.name}), after {_RESTARTS} restarts in a row that moved "
                               "nothing")
        self._restarts_without_progress += 1
        self._start_again()
        return f"{said}; started again from its last commit"

    def _restart_after_failure(self) -> str | None:
        """A job that failed or ended (a task or an executor lost, a lease that lapsed while the run was busy)
        starts again from its last report; after `_RESTARTS` in a row that moved nothing in between, or at once for
        a poison record (errors.tolerance=none), the failure stays for raise_if_ended (starting again changes
        nothing). Returns the warning to show, if restarted."""
        if self._stopped or self._job.alive() or self._restarts_without_progress >= _RESTARTS:
            return None
        failure = self._job.failure()
        if failure is not None and is_record_refused(failure):
            return None  # a poison record under errors.tolerance=none: started again, the job fails on it again
        self._restarts_without_progress += 1
        why = self._job.ended_because()  # what their lease said, if they said
        cause = root_cause(failure)[1] if failure is not None else f"its tasks ended{f': {why}' if why else ''}"
        self._start()
        return f"{RESTARTED}: {cause}"

    # --- the Stream protocol's end ----------------------------------------------------------------------
    def raise_if_ended(self) -> None:
        if self._job.alive() or self._stopped:
            return
        failure = self._job.failure()
        if failure is not None:
            raise failure
        raise RuntimeError(f"the stream of bridge {self._bridge.name} ended on its own")

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._end_job()
