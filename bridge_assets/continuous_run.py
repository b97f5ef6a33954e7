"""A continuous run: one long-lived run moving one or more bridges, each in a thread of its own, as Kafka Connect's
worker runs many connectors in one JVM. A bridge that names a host (`continuous.host`) shares that host's run
with the others naming it; any other continuous bridge has a run of its own, the same code with one member.

Each member keeps what a bridge has alone: its own lease (taken when it starts, released when it ends), its own
position recorded as its asset's materialization every commit interval, its own checks. Its thread opens its
stream (or loops its micro-batches) and hands each commit to the run's main thread, which records it: Dagster's
calls stay on the step's thread.

Who a run moves, and what a failure does, depends on who started it:
- a run of one bridge's job (its keeper sensor, `dagster asset materialize`, the UI): the selected bridges, for
  the run's length; a member that fails stops the others and fails the run, and the keeper starts the next;
- a host's run (its keeper, tagged `bridge-host`): the members whose sensor is on, looked up every few seconds,
  so a bridge switched on joins within seconds and one switched off ends after recording its commit; a member
  that fails is started again later and later (the sensors' backoff), the others moving on meanwhile.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator

from dagster import AssetExecutionContext, AssetKey, AssetMaterialization, AssetObservation, Failure, MetadataValue

from asset_metadata import as_metadata, recorded_position
from bridge_assets.continuous import Commit, follow_stream, loop_batches, termination_sets
from bridge_assets.failures import failure_line
from connectors.errors import BatchError, is_record_refused
from connectors.framework.leased_job import RESTARTED
from connectors.framework.stream_jobs import SharedJob, joining
from connectors.plugin import Bridge
import health
from resources.lease import BridgeBusy, BridgeLease, LeaseLost
from sensors.backoff import MAX_BACKOFF_S, backoff_delay_s
from sensors.switches import hold_stopped, release_stopped, stopped_because

# How often the main thread looks at its members and pending checks when nothing else wakes it.
_LOOK_S = 1.0
# How often a host's run reads its bridges' switches (their sensors' states): a read takes 7 ms of CPU on SQLite
# storage (Dagster opens the database and checks its tables each time): at one a second, three quarters of an idle
# thirty-bridge run's Python time.
_SWITCHES_LOOK_S = 3.0
# How an always-on run's first line begins (scripts wait for it: the run is moving).
ALWAYS_ON_LINE = "always on"


@dataclass
class _Member:
    bridge: Bridge
    lease: BridgeLease
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    failure: BaseException | None = None
    recorded: object = None  # the position last recorded (read at its start, then each materialization's)
    committed: object = None  # the position of its last commit, recorded or observed (None: no commit yet)


@dataclass
class _Retry:
    failures: int
    at: float  # monotonic; inf: held stopped (a record that can never pass)


def _moving_settings(bridge: Bridge) -> Bridge:
    """A micro-batch that pulls for longer than a commit interval would hold back the commits."""
    return dataclasses.replace(bridge, batch=bridge.batch.model_copy(
        update={"max_seconds": bridge.batch.max_seconds or bridge.continuous.commit_interval_ms / 1000,
                "progress_interval_ms": bridge.continuous.commit_interval_ms}))


def _data_moved(bridge: Bridge, member: _Member, commit: Commit) -> bool:
    """Whether a commit is a materialization: records moved, or the position did since the last commit (records
    skipped, or moved by a stream whose counts were lost to its failure). A stream's first commit names where it
    started: news only over a recorded position, or for a new bridge at `initial_offsets: latest` (started again, it
    would find a later place)."""
    if commit.moved:
        return True
    if member.committed is not None:
        return commit.position != member.committed
    position = bridge.plugin.position
    never_recorded = position is None or member.recorded == position.from_json(None)
    return commit.position != member.recorded and (not never_recorded or bridge.batch.initial_offsets == "latest")


class ContinuousRun:
    """The body of a continuous run; `run()` returns when every member has ended and recorded its last commit."""

    def __init__(self, context: AssetExecutionContext, members: list[Bridge],
                 wanted: Callable[[], set[str]] | None = None):
        self._context, self._systems = context, context.resources
        self._bridges = {b.name: b for b in members}
        # None: the selected bridges for the run's length (a run of one bridge's job); else a host's sensors.
        self._wanted = wanted
        self._hosted = wanted is not None
        self._wanted_cache: set[str] = set()
        self._wanted_at = float("-inf")
        self._events: queue.Queue = queue.Queue()
        self._members: dict[str, _Member] = {}
        self._retries: dict[str, _Retry] = {}
        self._busy_said: set[str] = set()
        self._stop = threading.Event()
        self._run_minutes = max(b.continuous.max_run_minutes for b in members)
        self._deadline = time.monotonic() + self._run_minutes * 60
        self._failed: Failure | None = None
        self._started_once: set[str] = set()
        self._shared: SharedJob | None = None
        # Check outcomes to report, in order: (asset, evaluations, only those that changed). Reported when no commit
        # waits: a host's first commits come within a second of each other, and their checks (four reports each on a
        # fresh instance) held the later bridges' first materializations back by seconds.
        self._checks_due: collections.deque[tuple[AssetKey, list, bool]] = collections.deque()

    def run(self) -> None:
        uses_spark = any("spark" in b.plugin.systems for b in self._bridges.values())
        name = next(iter(self._bridges)) if not self._hosted else self._context.op_handle.name
        # One Spark session for the whole run, its bridges' threads tagged apart.
        session = self._systems.spark.batch_session(name) if uses_spark else contextlib.nullcontext()
        with session as spark, termination_sets(self._stop):
            if self._hosted and spark is not None:
                # The host's streams share a job's tasks (and their Python workers): as many as its members'
                # largest stream_tasks.
                tasks = max(b.continuous.stream_tasks for b in self._bridges.values())
                streams = {b.name for b in self._bridges.values() if b.plugin.has_stream(b)}
                gather_s = max(b.continuous.commit_interval_ms for b in self._bridges.values()) / 1000 + 1
                host = next(iter(self._bridges.values())).host
                self._shared = SharedJob(spark, host, spark.getTags(), tasks, streams & self._wanted_now(), gather_s)
            try:
                self._move_until_ended()
            finally:
                if self._shared is not None:
                    self._shared.close()
        if self._failed is not None:
            raise self._failed

    def _move_until_ended(self) -> None:
        what = (f"host {self._context.op_handle.name.removeprefix('host_')}'s bridges that are switched on"
                if self._hosted else ", ".join(self._bridges))
        self._context.log.info(f"{ALWAYS_ON_LINE}: moving {what} as records arrive, until {self._run_minutes:g} "
                               "minutes are up or Ctrl-C / SIGTERM (each bridge records its position as it ends)")
        self._start_wanted()
        while self._members or not self._ending():
            try:
                event = self._events.get(block=not self._checks_due, timeout=_LOOK_S)
            except queue.Empty:
                event = None
            if event is not None:
                self._handle(*event)
            elif self._checks_due:
                self._report_next_checks()
            if self._ending():
                for member in self._members.values():
                    member.stop.set()
            else:
                self._start_wanted()
                self._stop_unwanted()
        while self._checks_due:
            self._report_next_checks()

    def _ending(self) -> bool:
        if self._stop.is_set() or self._failed is not None or time.monotonic() >= self._deadline:
            return True
        # Nobody left to move: a run of a bridge's job once its members have ended, a host's once every sensor
        # is off (its keeper starts the next run when one is switched on again).
        return not self._members and not self._wanted_now()

    # --- who moves ------------------------------------------------------------------------------------------
    def _wanted_now(self) -> set[str]:
        if self._wanted is None:
            return set(self._bridges) - self._started_once
        now = time.monotonic()
        if now - self._wanted_at >= _SWITCHES_LOOK_S:  # one storage read per look, however often the loop wakes
            self._wanted_cache, self._wanted_at = self._wanted() & set(self._bridges), now
        return self._wanted_cache

    def _start_wanted(self) -> None:
        now = time.monotonic()
        for name in sorted(self._wanted_now() - set(self._members)):
            retry = self._retries.get(name)
            if retry is not None and now < retry.at:
                continue
            if self._hosted and (cause := stopped_because(self._context.instance, name)):
                self._retries[name] = _Retry(1, float("inf"))
                self._context.log.error(f"{cause}; {self._held_stopped_line(name)}")
                continue
            self._start(self._bridges[name])

    @staticmethod
    def _held_stopped_line(name: str) -> str:
        return (f"{name} stays stopped, its check failed, until it is switched off and on again (`bridgectl bridges "
                f"stop {name}`, then `start`) once the record is dealt with (errors.tolerance=all with a dead-letter "
                "topic, or its position moved past it); the host's other bridges move on")

    def _stop_unwanted(self) -> None:
        if self._wanted is None:
            return
        switched_off = set(self._bridges) - self._wanted_now()
        for name in switched_off & set(self._members):
            if not self._members[name].stop.is_set():
                self._context.log.info(f"{name}: switched off; it ends after recording its commit")
                self._members[name].stop.set()
        for name in switched_off & set(self._retries):  # switched off: its failures are forgotten, a hold released
            if self._retries.pop(name).at == float("inf") and release_stopped(self._context.instance, name):
                self._context.log.info(f"{name}: switched off; switched on again, it starts afresh")

    def _start(self, bridge: Bridge) -> None:
        context = self._context
        try:
            lease = BridgeLease.acquire(context.instance, bridge.name, context.run_id,
                                        context.resources.bridge_lease.timing())
        except BridgeBusy as exc:
            if not self._hosted:
                raise Failure(description=str(exc), allow_retries=False) from None
            if self._shared is not None:
                self._shared.withdraw(bridge.name)
            if bridge.name not in self._busy_said:  # said once; tried again every look
                context.log.warning(str(exc))
                self._busy_said.add(bridge.name)
            return
        self._busy_said.discard(bridge.name)
        if lease.fenced:
            context.log.warning(f"Fenced run {lease.fenced.run_id} of bridge {bridge.name}: "
                                f"{lease.fenced.stale_because}")
        member = _Member(bridge, lease)
        member.thread = threading.Thread(target=self._move, args=(member,), name=f"bridge {bridge.name}", daemon=True)
        self._members[bridge.name] = member
        self._started_once.add(bridge.name)
        member.thread.start()

    # --- a member's thread ----------------------------------------------------------------------------------
    def _move(self, member: _Member) -> None:
        """Opens the bridge's stream (or loops its micro-batches) and hands its commits to the main thread."""
        bridge, systems = member.bridge, self._systems
        name = bridge.name
        try:
            if "spark" in bridge.plugin.systems:
                systems.spark.tag_thread(name)
            plugin = bridge.plugin
            position = recorded_position(self._context.instance, AssetKey(name), plugin.position)
            member.recorded = position  # before any commit is handed over: the main thread reads it after
            looping = _moving_settings(bridge)
            moving = looping.with_secrets()

            def warn(text: str) -> None:
                self._events.put(("warning", name, text))

            if plugin.has_stream(bridge):
                with joining(self._shared):  # the stream keeps the job it joined, for its restarts too
                    stream = plugin.open_stream(systems, moving, position)
                commits: Iterator[Commit] = follow_stream(stream, looping.continuous, warn, member.stop,
                                                          outage_timeout_s=looping.batch.outage_timeout_seconds)
            else:
                commits = loop_batches(lambda at: plugin.run_batch(systems, moving, at), plugin.watch(systems, moving),
                                       position, looping.continuous, warn, member.stop)
            for commit in commits:
                self._events.put(("commit", name, commit))
        except BaseException as exc:  # noqa: BLE001 - the main thread names it and decides
            if self._shared is not None:
                self._shared.withdraw(name)  # if its stream did not open, the others do not wait for it
            self._events.put(("ended", name, exc))
        else:
            self._events.put(("ended", name, None))

    # --- the main thread ------------------------------------------------------------------------------------
    def _handle(self, kind: str, name: str, payload) -> None:
        member = self._members.get(name)
        if member is None:
            return
        if kind == "warning":
            self._context.log.warning(f"{name}: {payload}" if self._hosted else payload)
            if payload.startswith(RESTARTED):  # failed, if started again at once: failing until it delivers
                self._report_failure(member.bridge, failure_line(member.bridge, BatchError(payload)))
                self._retries.setdefault(name, _Retry(0, time.monotonic()))
        elif kind == "commit":
            self._record(member, payload)
        elif kind == "ended":
            self._end(member, payload)

    def _record(self, member: _Member, commit: Commit) -> None:
        bridge, context = member.bridge, self._context
        key = AssetKey(bridge.name)
        # A termination while a commit is checked or reported ends the run after it, as during a batch; under
        # Dagster's own handler it would interrupt the step and lose the commit.
        with termination_sets(self._stop):
            try:
                member.lease.check()  # a fenced run records nothing
            except LeaseLost as exc:
                member.stop.set()
                member.failure = exc
                return
            context.log.info(f"{bridge.name}: {commit.line}" if self._hosted else commit.line)
            metadata = as_metadata(bridge.plugin.position, commit.position, commit.values)
            if _data_moved(bridge, member, commit):
                context.log_event(AssetMaterialization(asset_key=key, metadata=metadata))
                member.recorded = commit.position
            else:  # data did not move: "last materialized" keeps meaning it did; the lag is still news
                context.log_event(AssetObservation(asset_key=key, metadata=metadata))
            member.committed = commit.position
            evaluations = health.batch_evaluations(bridge, commit.values)
            delivered = commit.moved > 0 or health.caught_up(bridge, commit.values)
            if not delivered and bridge.name in self._retries:  # failing until it delivers again: only the lag
                evaluations = [e for e in evaluations if e.check == health.LAG_WITHIN_BOUND]
            # Only the checks whose outcome changed: a run's bridges commit every few seconds each, and the writes
            # of every check at every commit were a third of a thirty-bridge run's CPU.
            self._checks_due.append((key, evaluations, True))
        if delivered:
            self._retries.pop(bridge.name, None)

    def _report_failure(self, bridge: Bridge, cause: str) -> None:
        self._checks_due.append((AssetKey(bridge.name), [health.failed_batch_evaluation(cause)], False))

    def _report_next_checks(self) -> None:
        key, evaluations, only_changed = self._checks_due.popleft()
        with termination_sets(self._stop):  # as for a commit: a termination ends the run after the report
            if only_changed:
                health.report_changed(self._context.instance, key, evaluations)
            else:
                with contextlib.suppress(Exception):  # a failure's own line matters more than its check
                    health.report(self._context.instance, key, evaluations)

    def _end(self, member: _Member, exc: BaseException | None) -> None:
        bridge, context = member.bridge, self._context
        member.lease.release(free_slot=True)  # its commits are recorded already, each as it came
        del self._members[bridge.name]
        exc = member.failure or exc
        if exc is None:
            return
        cause = failure_line(bridge, exc)
        self._report_failure(bridge, cause)
        if not self._hosted:
            self._failed = Failure(description=cause, allow_retries=False, metadata={
                "trace": MetadataValue.text("".join(traceback.format_exception(exc))[-20_000:])})
            return
        failures = self._retries[bridge.name].failures + 1 if bridge.name in self._retries else 1
        if is_record_refused(exc):  # started again, it would fail on the same record: held until the user acts
            hold_stopped(context.instance, bridge.name, cause)
            self._retries[bridge.name] = _Retry(failures, float("inf"))
            context.log.error(f"{cause}; {self._held_stopped_line(bridge.name)}")
            return
        delay = backoff_delay_s(failures, bridge.sensor.interval_seconds)
        self._retries[bridge.name] = _Retry(failures, time.monotonic() + delay)
        context.log.error(f"{cause}; it starts again in {delay} s ({failures} failed in a row; the wait doubles "
                          f"with each, to at most {MAX_BACKOFF_S} s), the host's other bridges move on")
