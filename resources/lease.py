"""At most one batch of a bridge moves at a time, whoever starts it: the bridge lease, and its resource (the timing).

Why a lease taken in the asset's body covers every launch path: a run started by a sensor, from the UI's
launchpad, by `dagster asset materialize` or by a second process of the deployment executes that body
against the same Dagster instance, so each meets the same lease before it reads anything. (The queue's
tag limit covers only runs queued by the daemon, and an executor-claimed op pool slot held by a run whose
process died is never given back.)

The lease is the one slot of a concurrency pool named after the bridge (`bridge/<name>`, shown on the UI's
concurrency page). A claim is atomic on Postgres and MySQL storage (row locks); SQLite storage lives on one
host, and there a file lock next to the database serializes the claims, since Dagster's SQLite claim is a
read followed by a write. The holder writes a heartbeat (run, host, pid) into the instance's key-value storage.
A holder is stale when its run has finished, its process is gone from this host, or its heartbeat is older
than `stale_after_s` (a holder on another host): it is fenced (its run is
marked failed, its slot freed), never trusted; if its process still lives, it finds the lease gone at its
next heartbeat and records nothing. Heartbeats are wall-clock seconds, so hosts sharing a Postgres
instance need synchronized clocks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from dagster import ConfigurableResource, DagsterInstance
from dagster._utils.concurrency import ConcurrencyKeyInfo
from pydantic import Field

from connectors.processes import process_start_ticks

def _step_key(bridge: str) -> str:
    """The claim's step key, one per bridge: a run holding several bridges (a host's) frees one without the others."""
    return f"bridge-batch/{bridge}"


@dataclass(frozen=True)
class LeaseTiming:
    heartbeat_s: float = 5.0
    # Six missed heartbeats: a run process busy in a long GC or a slow storage write is not fenced.
    stale_after_s: float = 30.0


class BridgeBusy(Exception):
    """Another live run holds the bridge's lease (`holder_run_id`, when known)."""

    def __init__(self, message: str, holder_run_id: str | None = None):
        super().__init__(message)
        self.holder_run_id = holder_run_id


class LeaseLost(Exception):
    """This run's lease was fenced (its heartbeat stopped for too long) and another run may hold it."""


def pool_name(bridge: str) -> str:
    return f"bridge/{bridge}"


def _heartbeat_key(bridge: str) -> str:
    return f"kafka-pubsub-bridge/lease-heartbeat/{bridge}"


@contextlib.contextmanager
def _claims_serialized(instance: DagsterInstance) -> Iterator[None]:
    storage = instance.event_log_storage
    if "sqlite" not in type(storage).__module__:
        yield
        return
    path = os.path.join(instance.storage_directory(), "bridge-leases.lock")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Holder:
    run_id: str
    seconds_since_heartbeat: float
    stale_because: str | None  # None: live
    finished: bool = False  # its run has ended: the lease is simply free


def current_holder(instance: DagsterInstance, bridge: str, timing: LeaseTiming) -> Holder | None:
    """Who holds the bridge's lease, and whether that holder is stale."""
    claimed = instance.event_log_storage.get_concurrency_info(pool_name(bridge)).claimed_slots
    if not claimed:
        return None
    run_id = claimed[0].run_id
    record = instance.get_run_record_by_id(run_id)
    if record is None:
        return Holder(run_id, 0.0, "its run no longer exists", finished=True)
    if record.dagster_run.is_finished:
        return Holder(run_id, 0.0, f"its run has finished ({record.dagster_run.status.value})", finished=True)
    key = _heartbeat_key(bridge)
    beat = json.loads(instance.run_storage.get_cursor_values({key}).get(key) or "{}")
    # Before its first heartbeat a holder's last sign of life is its run's start.
    last_alive = beat["at"] if beat.get("run_id") == run_id else (record.start_time or record.create_timestamp.timestamp())
    age = time.time() - last_alive
    if beat.get("run_id") == run_id and _gone_from_this_host(beat):
        return Holder(run_id, age, f"its process {beat['pid']} on this host is gone")
    stale = f"no heartbeat for {age:.0f} s" if age > timing.stale_after_s else None
    return Holder(run_id, age, stale)


def _gone_from_this_host(beat: dict) -> bool:
    """The heartbeat's process was on this host and is gone."""
    return beat.get("host") == socket.gethostname() and not _process_alive(beat["pid"], beat.get("pid_started"))


def _process_alive(pid: int, started: int | None) -> bool:
    """On the holder's own host a dead holder is seen at once, without waiting for its heartbeat to age."""
    ticks = process_start_ticks(pid)
    return ticks is not None and started in (None, ticks)


def fence(instance: DagsterInstance, bridge: str, holder: Holder) -> None:
    """Take the lease from a stale holder: mark its run failed (if it is not finished) and free its slot."""
    run = instance.get_run_by_id(holder.run_id)
    if run is not None and not run.is_finished:
        instance.report_run_failed(run, f"Fenced: this run held bridge {bridge} but {holder.stale_because}; "
                                        "its process is taken to be dead and its batch was not recorded.")
    instance.event_log_storage.free_concurrency_slots_for_run(holder.run_id)


def fence_if_stale(instance: DagsterInstance, bridge: str, timing: LeaseTiming = LeaseTiming()) -> Holder | None:
    """For sensors: fence a stale holder of the bridge (or free the slot of a finished one); returns it."""
    holder = current_holder(instance, bridge, timing)
    if holder is None or holder.stale_because is None:
        return None
    with _claims_serialized(instance):
        holder = current_holder(instance, bridge, timing)
        if holder is None or holder.stale_because is None:
            return None
        fence(instance, bridge, holder)
    return holder


def fence_stale(instance: DagsterInstance, bridges: list[str],
                timing: LeaseTiming = LeaseTiming()) -> dict[str, Holder]:
    """For sensors: `fence_if_stale` for each of `bridges` whose heartbeat does not show its holder alive, their
    heartbeats read first in one storage read; returns the holders fenced, by bridge. A host's keeper looks at every
    bridge of the host each tick, and the full look costs three reads a bridge: at thirty bridges, 2 % of a core of
    an idle code server. (A holder beating is not stale; a run that lost its lease stops beating, and is looked at
    fully once its beat is `stale_after_s` old.)"""
    keys = {_heartbeat_key(bridge): bridge for bridge in bridges}
    beats = instance.run_storage.get_cursor_values(set(keys))
    fenced = {}
    for key, bridge in keys.items():
        if _beats_alive(beats.get(key), timing):
            continue
        holder = fence_if_stale(instance, bridge, timing)
        if holder is not None:
            fenced[bridge] = holder
    return fenced


def _beats_alive(value: str | None, timing: LeaseTiming) -> bool:
    """A heartbeat younger than `stale_after_s`, from a process that still lives when it is on this host."""
    beat = json.loads(value or "{}")
    if "at" not in beat or time.time() - beat["at"] > timing.stale_after_s:
        return False
    return not _gone_from_this_host(beat)


class BridgeLease:
    """Held while a run moves one batch of a bridge; `check()` before recording anything."""

    def __init__(self, instance: DagsterInstance, bridge: str, run_id: str, timing: LeaseTiming):
        self._instance, self._bridge, self._run_id, self._timing = instance, bridge, run_id, timing
        self._stop = threading.Event()
        self._lost: str | None = None
        self._last_beat = time.time()
        # monotonic time of the last beat that found the lease still this run's and wrote its heartbeat
        self._confirmed_at = float("-inf")
        self._pid_started = process_start_ticks(os.getpid())
        self.fenced: Holder | None = None

    @classmethod
    def acquire(cls, instance: DagsterInstance, bridge: str, run_id: str,
                timing: LeaseTiming = LeaseTiming()) -> BridgeLease:
        lease = cls(instance, bridge, run_id, timing)
        lease._claim()
        confirmed = time.monotonic()
        lease._instance.run_storage.set_cursor_values(dict([lease._heartbeat()]))
        lease._beaten(confirmed)
        _Heartbeats.hold(lease)
        return lease

    def _claim(self) -> None:
        storage, pool = self._instance.event_log_storage, pool_name(self._bridge)
        with _claims_serialized(self._instance):
            if storage.get_concurrency_info(pool).slot_count != 1:
                storage.set_concurrency_slots(pool, 1)
            holder = current_holder(self._instance, self._bridge, self._timing)
            if holder is not None and holder.run_id != self._run_id:
                if holder.stale_because is None:
                    raise BridgeBusy(
                        f"bridge {self._bridge} is moving a batch in run {holder.run_id} (heartbeat "
                        f"{holder.seconds_since_heartbeat:.0f} s ago); this run stopped before reading anything. "
                        f"Run it again when that run has finished.", holder.run_id)
                fence(self._instance, self._bridge, holder)
                if not holder.finished:
                    self.fenced = holder
            status = storage.claim_concurrency_slot(pool, self._run_id, _step_key(self._bridge))
            if not status.is_claimed:
                # leave no pending claim behind
                storage.free_concurrency_slot_for_step(self._run_id, _step_key(self._bridge))
                raise BridgeBusy(f"bridge {self._bridge}: another run claimed its lease at the same moment; "
                                 "this run stopped before reading anything")

    def holds_in(self, claimed: ConcurrencyKeyInfo) -> bool:
        return any(slot.run_id == self._run_id for slot in claimed.claimed_slots)

    def _heartbeat(self) -> tuple[str, str]:
        return _heartbeat_key(self._bridge), json.dumps({
            "run_id": self._run_id, "at": time.time(), "host": socket.gethostname(), "pid": os.getpid(),
            "pid_started": self._pid_started})

    def _beaten(self, confirmed_at: float) -> None:
        self._last_beat, self._confirmed_at = time.time(), confirmed_at

    def _beat_failed(self, error: Exception) -> None:
        # Without heartbeats for stale_after_s another run may take the lease: this one must not record.
        if time.time() - self._last_beat > self._timing.stale_after_s:
            self._lost = f"its heartbeat could not be written for {self._timing.stale_after_s:.0f} s " \
                         f"({type(error).__name__})"

    def check(self) -> None:
        """Raise if the lease is no longer this run's: then the batch must not be recorded."""
        # A beat that found the lease this run's less than a heartbeat ago also wrote its heartbeat then: nobody
        # can have found this run stale since (that takes stale_after_s), so storage is not asked again.
        recent = time.monotonic() - self._confirmed_at < self._timing.heartbeat_s
        if self._lost is None and not recent:
            info = self._instance.event_log_storage.get_concurrency_info(pool_name(self._bridge))
            if not self.holds_in(info):
                self._lost = "another run fenced it"
        if self._lost is not None:
            raise LeaseLost(f"run {self._run_id} lost its lease on bridge {self._bridge} ({self._lost}); its batch "
                            "is not recorded, and the next run moves those records again (at least once)")

    def release(self, free_slot: bool = False) -> None:
        """Stop heartbeating. A batch's slot stays claimed until its run has finished, since Dagster stores its
        materialization (the position the next run reads) only after the asset's body has returned; the next
        claimant, or the sensor, frees it then. `free_slot`: free it now, for a run that recorded every position as
        an event as it went (an always-on run's bridge that ended while the run goes on: a claim without heartbeats
        would look stale, and fencing it would fail the whole run)."""
        with _Heartbeats.writing:  # a beat under way writes no heartbeat for this lease after this
            self._stop.set()
        if free_slot:
            self._instance.event_log_storage.free_concurrency_slot_for_step(self._run_id, _step_key(self._bridge))


class _Heartbeats:
    """The heartbeats of every lease a process holds on one instance, in one thread: each beat reads their slots
    in one query and writes their heartbeats in one write, however many there are (a host's run holds one per
    bridge; a thread and two storage round trips per lease cost a host of thirty bridges a tenth of a core)."""

    _each: dict[tuple[int, LeaseTiming], _Heartbeats] = {}
    _each_lock = threading.Lock()
    # Held from a beat's last look at which leases are released to its write, and by release(): a lease released
    # while a beat reads the slots gets no heartbeat after release() returns (one written then would make the
    # holder look alive to the next claimant for stale_after_s).
    writing = threading.Lock()

    def __init__(self, instance: DagsterInstance, timing: LeaseTiming):
        self._instance, self._timing = instance, timing
        self._leases: list[BridgeLease] = []
        self._thread = threading.Thread(target=self._beat_while_held, name="bridge lease heartbeats", daemon=True)

    @classmethod
    def hold(cls, lease: BridgeLease) -> None:
        """Beat `lease` from now on, in its instance's thread (started if there is none)."""
        with cls._each_lock:
            key = (id(lease._instance), lease._timing)
            beats = cls._each.get(key)
            if beats is None:
                beats = cls._each[key] = cls(lease._instance, lease._timing)
                beats._thread.start()
            beats._leases.append(lease)

    def _held(self) -> list[BridgeLease] | None:
        """The leases still held; None once there are none (the thread ends, and the next lease starts another)."""
        with self._each_lock:
            self._leases = [lease for lease in self._leases if not lease._stop.is_set() and lease._lost is None]
            if not self._leases:
                del self._each[(id(self._instance), self._timing)]
                return None
            return list(self._leases)

    def _beat_while_held(self) -> None:
        while True:
            time.sleep(self._timing.heartbeat_s)
            leases = self._held()
            if leases is None:
                return
            confirmed = time.monotonic()
            try:
                claimed = self._instance.event_log_storage.get_concurrency_infos(
                    [pool_name(lease._bridge) for lease in leases])
                held = []
                for lease in leases:
                    if lease.holds_in(claimed[pool_name(lease._bridge)]):
                        held.append(lease)
                    else:
                        lease._lost = "another run fenced it"
                with self.writing:
                    held = [lease for lease in held if not lease._stop.is_set()]
                    if held:
                        self._instance.run_storage.set_cursor_values(dict(lease._heartbeat() for lease in held))
                for lease in held:
                    lease._beaten(confirmed)
            except Exception as exc:  # noqa: BLE001 - storage unreachable: the next beat tries again
                for lease in leases:
                    lease._beat_failed(exc)


class BridgeLeaseResource(ConfigurableResource):
    """How a run holding a bridge's lease proves it is alive, and when a silent holder is fenced."""

    heartbeat_seconds: float = Field(5.0, gt=0, description="How often the holder writes its heartbeat")
    stale_after_seconds: float = Field(
        30.0, gt=0, description="A holder silent this long is taken to be dead: its run is marked failed and "
                                "its lease given to the next run (BRIDGE_LEASE_STALE_AFTER_SECONDS)")

    def timing(self) -> LeaseTiming:
        if self.stale_after_seconds <= 2 * self.heartbeat_seconds:
            raise ValueError(f"bridge_lease: stale_after_seconds ({self.stale_after_seconds}) must be more than "
                             f"twice heartbeat_seconds ({self.heartbeat_seconds})")
        return LeaseTiming(self.heartbeat_seconds, self.stale_after_seconds)
