"""An always-on job that moves nothing while records wait for it is started again, and fails the run in the end."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from connectors.framework.leased_job import _RESTARTS, STALLED, LeasedJob


class _Job:
    def __init__(self):
        self.ended = False

    def alive(self) -> bool:
        return not self.ended

    def end(self, wait_s: float) -> None:
        self.ended = True


class _Stream(LeasedJob):
    """A LeasedJob without Spark or Kafka: its job and lease are stand-ins, `_start` counts."""

    def __init__(self):  # not the base's, which needs a Spark session: only what the stall check reads
        self._bridge = SimpleNamespace(name="b", batch=SimpleNamespace(outage_timeout_seconds=30),
                                       continuous=SimpleNamespace(commit_interval_ms=1000))
        self._stopped = False
        self._restarts_without_progress = 0
        self._lease = SimpleNamespace(stop=lambda: None)
        self._liveness = None
        self._job = _Job()
        self.starts = 0
        self._moved_at, self._moved_since_launch = time.monotonic(), True

    def _start(self) -> None:
        self.starts += 1
        self._job = _Job()
        self._moved_at, self._moved_since_launch = time.monotonic(), False

    def stuck_for(self, seconds: float) -> None:
        self._moved_at = time.monotonic() - seconds


def test_a_job_moving_nothing_within_the_limit_or_with_nothing_waiting_is_left_alone():
    stream = _Stream()
    stream.stuck_for(60)  # under 2 x 30 s + 1 s
    assert stream._restart_if_stalled(500, lambda: True) is None
    stream.stuck_for(600)
    assert stream._restart_if_stalled(0, lambda: True) is None  # idle: nothing waits
    assert stream._restart_if_stalled(500, lambda: True) is None  # the idle look above started the clock again
    assert stream.starts == 0


def test_offsets_ahead_holding_no_record_are_not_a_stall():
    stream = _Stream()
    stream.stuck_for(600)
    assert stream._restart_if_stalled(1, lambda: False) is None  # a transaction marker at the end
    assert stream.starts == 0 and not stream._job.ended


def test_a_stalled_job_is_started_again_and_after_restarts_that_moved_nothing_the_run_fails():
    stream = _Stream()
    stream.stuck_for(62)
    assert stream._restart_if_stalled(500, lambda: True).startswith(
        f"{STALLED} for 62 s with 500 records waiting; started again")
    for restart in range(1, _RESTARTS):
        stream.stuck_for(62)  # a job started again that has not moved yet has the start allowance too
        assert stream._restart_if_stalled(500, lambda: True) is None
        stream.stuck_for(182)
        assert stream._restart_if_stalled(500, lambda: True).startswith(f"{STALLED} for 182 s")
        assert stream.starts == restart + 1
    stream.stuck_for(182)
    with pytest.raises(RuntimeError, match=r"moved nothing for 182 s with 500 records waiting \(bridge b\), after 3"):
        stream._restart_if_stalled(500, lambda: True)
    assert stream._job.ended


def test_progress_made_resets_the_count_and_the_clock():
    stream = _Stream()
    stream.stuck_for(62)
    stream._restart_if_stalled(500, lambda: True)
    stream._progress_made()
    assert stream._restarts_without_progress == 0
    assert stream._restart_if_stalled(500, lambda: True) is None


class _EndedJob(_Job):
    """A job whose tasks ended through their lease, saying why (or not)."""

    def __init__(self, why: str | None):
        super().__init__()
        self.ended, self.why = True, why

    def failure(self) -> None:
        return None

    def ended_because(self) -> str | None:
        return self.why


@pytest.mark.parametrize("why, said", [
    ("the run has not renewed its lease for 0.8 s", "its tasks ended: the run has not renewed its lease for 0.8 s"),
    (None, "its tasks ended"),
])
def test_a_job_whose_tasks_ended_is_started_again_saying_why_their_lease_ended_them(why, said):
    from connectors.framework.leased_job import RESTARTED

    stream = _Stream()
    stream._job = _EndedJob(why)
    assert stream._restart_after_failure() == f"{RESTARTED}: {said}"
    assert stream.starts == 1
