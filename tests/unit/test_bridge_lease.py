"""The bridge lease against a real (temporary, SQLite) Dagster instance: one holder at a time, and
stale holders fenced, never trusted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.storage.dagster_run import DagsterRun

from resources.lease import BridgeBusy, BridgeLease, LeaseLost, LeaseTiming, _Heartbeats, fence_if_stale, fence_stale, pool_name

TIMING = LeaseTiming(heartbeat_s=0.2, stale_after_s=1.0)


@pytest.fixture
def instance():
    with DagsterInstance.local_temp() as temp:
        yield temp
        _stop_heartbeats(temp)


def _stop_heartbeats(instance: DagsterInstance) -> None:
    """Stop every lease a test left held and wait for its heartbeat thread: a beat writing into the instance while
    its temporary directory is removed fails the teardown ("Directory not empty")."""
    beating = [beats for (instance_id, _), beats in list(_Heartbeats._each.items()) if instance_id == id(instance)]
    for beats in beating:
        for lease in list(beats._leases):
            lease.release()
        beats._thread.join(timeout=10)
        assert not beats._thread.is_alive(), "a lease heartbeat thread did not end"


def started_run(instance: DagsterInstance) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name="bridge_job", run_id=run_id, status=DagsterRunStatus.STARTED))
    return run_id


def claimed_by(instance: DagsterInstance, bridge: str) -> list[str]:
    return [s.run_id for s in instance.event_log_storage.get_concurrency_info(pool_name(bridge)).claimed_slots]


def test_a_second_run_is_refused_while_the_first_holds_the_lease(instance):
    first, second = started_run(instance), started_run(instance)
    lease = BridgeLease.acquire(instance, "orders", first, TIMING)
    with pytest.raises(BridgeBusy, match=f"bridge orders is moving a batch in run {first}"):
        BridgeLease.acquire(instance, "orders", second, TIMING)
    assert claimed_by(instance, "orders") == [first]
    time.sleep(TIMING.stale_after_s * 1.5)  # heartbeats keep a live holder's lease
    with pytest.raises(BridgeBusy):
        BridgeLease.acquire(instance, "orders", second, TIMING)
    lease.check()
    lease.release()


def test_other_bridges_are_independent(instance):
    BridgeLease.acquire(instance, "orders", started_run(instance), TIMING).release()
    BridgeLease.acquire(instance, "payments", started_run(instance), TIMING).release()


def test_the_lease_of_a_finished_run_is_free(instance):
    first = started_run(instance)
    BridgeLease.acquire(instance, "orders", first, TIMING).release()
    instance.report_run_failed(instance.get_run_by_id(first))
    second = started_run(instance)
    lease = BridgeLease.acquire(instance, "orders", second, TIMING)
    assert lease.fenced is None and claimed_by(instance, "orders") == [second]


def test_a_holder_whose_process_is_gone_is_fenced_at_once(instance):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    holder = started_run(instance)
    lease = BridgeLease.acquire(instance, "orders", holder, TIMING)
    lease.release()
    key = "kafka-pubsub-bridge/lease-heartbeat/orders"
    beat = json.loads(instance.run_storage.get_cursor_values({key})[key])
    instance.run_storage.set_cursor_values({key: json.dumps({**beat, "pid": dead.pid, "pid_started": None})})

    newcomer = started_run(instance)
    lease = BridgeLease.acquire(instance, "orders", newcomer, TIMING)
    assert lease.fenced is not None and f"its process {dead.pid} on this host is gone" in lease.fenced.stale_because
    assert instance.get_run_by_id(holder).status == DagsterRunStatus.FAILURE
    assert claimed_by(instance, "orders") == [newcomer]


def test_a_released_lease_gets_no_heartbeat_from_a_beat_under_way(instance, monkeypatch):
    """release() during a beat's read of the slots: that beat must not write the released holder's heartbeat after
    release() returned (it would make a gone holder look alive to the next claimant for stale_after_s)."""
    import threading

    storage = instance.event_log_storage
    reading, read = threading.Event(), storage.get_concurrency_infos

    def slow_read(pools):
        reading.set()
        time.sleep(0.5)
        return read(pools)

    lease = BridgeLease.acquire(instance, "orders", started_run(instance), TIMING)
    monkeypatch.setattr(storage, "get_concurrency_infos", slow_read)
    assert reading.wait(5)
    lease.release()
    key = "kafka-pubsub-bridge/lease-heartbeat/orders"
    instance.run_storage.set_cursor_values({key: "after release"})
    time.sleep(1.0)  # the slow beat has ended
    assert instance.run_storage.get_cursor_values({key})[key] == "after release"


def test_a_silent_holder_is_fenced_after_the_stale_time_and_cannot_record(instance):
    holder = started_run(instance)
    lease = BridgeLease.acquire(instance, "orders", holder, TIMING)
    lease._stop.set()  # the holder hangs: no more heartbeats, but its process lives
    time.sleep(TIMING.stale_after_s + 0.5)
    fenced = fence_if_stale(instance, "orders", TIMING)
    assert fenced is not None and fenced.run_id == holder and "no heartbeat for" in fenced.stale_because
    assert instance.get_run_by_id(holder).status == DagsterRunStatus.FAILURE
    BridgeLease.acquire(instance, "orders", started_run(instance), TIMING)
    with pytest.raises(LeaseLost, match="its batch is not recorded"):
        lease.check()


def test_fence_if_stale_leaves_a_live_holder_alone(instance):
    holder = started_run(instance)
    lease = BridgeLease.acquire(instance, "orders", holder, TIMING)
    assert fence_if_stale(instance, "orders", TIMING) is None
    assert instance.get_run_by_id(holder).status == DagsterRunStatus.STARTED
    lease.release()


def test_fence_stale_looks_fully_only_at_bridges_not_beating(instance, monkeypatch):
    beating, silent = started_run(instance), started_run(instance)
    live = BridgeLease.acquire(instance, "orders", beating, TIMING)
    hung = BridgeLease.acquire(instance, "payments", silent, TIMING)
    hung._stop.set()  # no more heartbeats, its process lives
    time.sleep(TIMING.stale_after_s + 0.5)
    storage, read, looked_at = instance.event_log_storage, instance.event_log_storage.get_concurrency_info, []
    monkeypatch.setattr(storage, "get_concurrency_info", lambda pool: looked_at.append(pool) or read(pool))

    fenced = fence_stale(instance, ["orders", "payments", "refunds"], TIMING)

    assert list(fenced) == ["payments"] and fenced["payments"].run_id == silent
    assert instance.get_run_by_id(silent).status == DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(beating).status == DagsterRunStatus.STARTED
    assert pool_name("orders") not in looked_at and pool_name("refunds") in looked_at
    live.release()
