"""The continuous loop's pure logic: when it moves, when it commits, what a commit carries."""

from __future__ import annotations

import pytest

from bridge_assets.continuous import loop_batches
from connectors.plugin import BatchReport
from connectors.bridge import ContinuousSettings


class FakeTime:
    def __init__(self):
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Source:
    """Records arrive in `arrivals` (time -> count); a batch moves what has arrived and takes 0.1 s."""

    def __init__(self, time: FakeTime, arrivals: dict[float, int], fail_at: float | None = None):
        self.time, self.arrivals, self.fail_at = time, arrivals, fail_at
        self.moves = self.looks = 0

    def available(self, position: int) -> int:
        return sum(n for at, n in self.arrivals.items() if at <= self.time.now) - position

    def pending(self, position: int) -> bool:
        self.looks += 1
        return self.available(position) > 0

    def move(self, position: int) -> BatchReport:
        self.moves += 1
        if self.fail_at is not None and self.time.now >= self.fail_at:
            raise RuntimeError("target down")
        n = self.available(position)
        self.time.now += 0.1
        return BatchReport(n, position + n, {"records": n}, ("records",), f"{n} moved")


def run(source: Source, time: FakeTime, **settings):
    loop = loop_batches(source.move, source.pending, 0, ContinuousSettings(**settings), lambda w: None,
                        clock=time.clock, sleep=time.sleep)
    return list(loop)


def test_commits_carry_the_position_after_the_window_and_its_totals():
    time = FakeTime()
    source = Source(time, {0: 100, 3: 50, 4: 25})
    commits = run(source, time, trigger_interval_ms=200, commit_interval_ms=2000, max_run_minutes=0.2)
    positions = [c.position for c in commits]
    assert positions == sorted(positions) and positions[-1] == 175
    assert sum(c.values["records"] for c in commits) == 175  # each record counted in exactly one commit
    assert commits[-1].final and not any(c.final for c in commits[:-1])
    # windows are at least the commit interval apart, so the event log grows per interval, not per batch
    assert len(commits) <= 12 * 1000 // 2000 + 1


def test_idle_loop_only_looks_every_trigger_interval_and_does_not_commit():
    time = FakeTime()
    source = Source(time, {0: 10})
    commits = run(source, time, trigger_interval_ms=500, commit_interval_ms=1000, max_run_minutes=1)
    assert source.moves == 2  # the first batch, and the one right after it (found nothing)
    assert 100 <= source.looks <= 121  # 60 s / 0.5 s
    assert len(commits) == 2 and commits[0].values["records"] == 10
    assert commits[1].final and commits[1].values["records"] == 0 and commits[1].position == 10


def test_a_failing_batch_first_commits_what_moved_before_it():
    time = FakeTime()
    source = Source(time, {0: 10, 0.5: 5, 1.0: 1}, fail_at=1.0)
    loop = loop_batches(source.move, source.pending, 0, ContinuousSettings(commit_interval_ms=60_000),
                        lambda w: None, clock=time.clock, sleep=time.sleep)
    commit = next(loop)
    assert commit.position == 15 and not commit.final
    with pytest.raises(RuntimeError, match="target down"):
        next(loop)


def test_a_termination_between_batches_commits_and_goes_on_up():
    time = FakeTime()
    source = Source(time, {0: 10})

    def interrupted_sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    loop = loop_batches(source.move, source.pending, 0, ContinuousSettings(), lambda w: None,
                        clock=time.clock, sleep=interrupted_sleep)
    assert next(loop).position == 10
    with pytest.raises(KeyboardInterrupt):
        next(loop)


def test_a_stop_during_a_batch_ends_the_loop_after_it_with_its_position_recorded():
    import threading

    time = FakeTime()
    source = Source(time, {0: 10, 1.0: 7})
    stop = threading.Event()
    move = source.move

    def move_then_stop(position):
        outcome = move(position)
        if outcome.moved == 7:
            stop.set()  # the termination arrives while this batch is in flight
        return outcome

    commits = list(loop_batches(move_then_stop, source.pending, 0, ContinuousSettings(commit_interval_ms=60_000),
                                lambda w: None, stop, clock=time.clock, sleep=time.sleep))
    assert [c.final for c in commits] == [True]
    assert commits[0].position == 17 and commits[0].values["records"] == 17
    assert time.now < 2


def test_a_loop_that_never_moved_anything_still_ends_with_its_position():
    time = FakeTime()
    source = Source(time, {})
    commits = run(source, time, max_run_minutes=0.05)
    assert len(commits) == 1 and commits[0].final and commits[0].values["records"] == 0
