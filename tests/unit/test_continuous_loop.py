"""The continuous loop's pure logic: when it moves, when it commits, what a commit carries."""

from __future__ import annotations

import pytest

from bridge_assets.continuous import follow_stream, loop_batches
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


class FakeStream:
    """Records arrive in `arrivals` (time -> count) and are acknowledged at once; `fail_at` ends it with an error."""

    def __init__(self, time: FakeTime, arrivals: dict[float, int], fail_at: float | None = None):
        self.time, self.arrivals, self.fail_at = time, arrivals, fail_at
        self.position, self.stopped_at = 0, None

    def progress(self) -> BatchReport:
        until = min(self.time.now, self.stopped_at if self.stopped_at is not None else self.time.now)
        if self.fail_at is not None:
            until = min(until, self.fail_at)
        arrived = sum(n for at, n in self.arrivals.items() if at <= until)
        n, self.position = arrived - self.position, arrived
        return BatchReport(n, self.position, {"records": n}, ("records",), f"{n} moved")

    def raise_if_ended(self) -> None:
        if self.fail_at is not None and self.time.now >= self.fail_at:
            raise RuntimeError("target down")

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = self.time.now


def follow(stream: FakeStream, time: FakeTime, stop=None, **settings):
    return follow_stream(stream, ContinuousSettings(**settings), lambda w: None, stop, clock=time.clock,
                         wait=time.sleep)


def test_a_stream_commits_each_interval_it_moved_something_and_once_at_its_end():
    time = FakeTime()
    stream = FakeStream(time, {0.5: 100, 3.5: 50, 3.7: 25})
    commits = list(follow(stream, time, commit_interval_ms=1000, max_run_minutes=0.2))
    assert [c.position for c in commits] == [100, 175, 175]  # idle reads record nothing
    assert [c.values["records"] for c in commits] == [100, 75, 0]
    assert commits[-1].final and stream.stopped_at is not None
    assert "progress reads" in commits[0].line


class CountedReads(FakeStream):
    def __init__(self, time: FakeTime, arrivals: dict[float, int]):
        super().__init__(time, arrivals)
        self.reads: list[float] = []

    def progress(self) -> BatchReport:
        self.reads.append(self.time.now)
        return super().progress()


def test_a_stream_is_read_every_second_until_its_first_records_show_then_every_commit_interval():
    time = FakeTime()
    stream = CountedReads(time, {2.5: 100, 4: 50})
    commits = list(follow(stream, time, commit_interval_ms=5000, max_run_minutes=0.25))
    assert [c.moved for c in commits][:2] == [100, 50]
    assert stream.reads[:5] == [1, 2, 3, 8, 13]  # the first records show at 3 s, not at 5 s


def test_an_idle_stream_reads_quickly_only_for_its_first_seconds():
    from bridge_assets.continuous import QUICK_READ_S, QUICK_READS_FOR_S

    time = FakeTime()
    stream = CountedReads(time, {})
    recorded_at = [time.now for _ in follow(stream, time, commit_interval_ms=5000, max_run_minutes=1)]
    assert recorded_at[0] == 5  # where it stands, a commit interval after it opened, as without quick reads
    quick = int(QUICK_READS_FOR_S / QUICK_READ_S)
    assert stream.reads[:quick] == [QUICK_READ_S * (i + 1) for i in range(quick)]
    assert stream.reads[quick:quick + 3] == [QUICK_READS_FOR_S + 5 * (i + 1) for i in range(3)]


def test_a_failed_stream_first_commits_what_it_moved_then_raises():
    time = FakeTime()
    stream = FakeStream(time, {0.5: 10, 2.5: 5}, fail_at=2.8)
    loop = follow(stream, time, commit_interval_ms=1000)
    assert next(loop).position == 10
    assert next(loop).position == 15  # the read at 3 s sees what moved before the failure
    with pytest.raises(RuntimeError, match="target down"):
        next(loop)
    assert stream.stopped_at is not None


def test_a_stop_stops_the_stream_before_its_last_read():
    import threading

    time = FakeTime()
    stream = FakeStream(time, {0.5: 10, 1.5: 7, 9: 1000})
    stop = threading.Event()

    def wait(seconds: float) -> None:
        time.sleep(seconds)
        if time.now >= 2:
            stop.set()

    loop = follow_stream(stream, ContinuousSettings(commit_interval_ms=1000), lambda w: None, stop,
                         clock=time.clock, wait=wait)
    commits = list(loop)
    assert commits[-1].final and commits[-1].position == 17 and stream.stopped_at == 2


class UnreachableFor(FakeStream):
    """Its progress cannot be read between `down` and `up` (a broker restarted under it); its tasks go on."""

    def __init__(self, time: FakeTime, arrivals: dict[float, int], down: float, up: float):
        super().__init__(time, arrivals)
        self.down, self.up = down, up

    def progress(self) -> BatchReport:
        from connectors.outage import Unreachable

        if self.down <= self.time.now < self.up:
            raise Unreachable("Kafka at 127.0.0.1:9092 did not answer while reading the progress of b: Local: Timed "
                              "out; the run recorded nothing")
        return super().progress()


def test_a_progress_read_that_finds_kafka_unreachable_is_tried_again_within_the_outage_timeout():
    time, warnings = FakeTime(), []
    stream = UnreachableFor(time, {0.5: 10, 2.5: 5, 6.5: 7}, down=2, up=6)
    commits = list(follow_stream(stream, ContinuousSettings(commit_interval_ms=1000, max_run_minutes=0.2),
                                 warnings.append, None, clock=time.clock, wait=time.sleep, outage_timeout_s=30))
    assert [c.position for c in commits] == [10, 15, 22, 22]  # nothing lost or counted twice over the outage
    assert sum(c.values["records"] for c in commits) == 22
    assert warnings == ["its progress could not be read (Kafka at 127.0.0.1:9092 did not answer while reading the "
                        "progress of b: Local: Timed out); the stream goes on, and the read is tried again at each "
                        "commit interval for up to 30 s"]  # once per outage


def test_an_outage_longer_than_the_timeout_fails_the_stream_naming_it():
    from connectors.outage import Unreachable

    time = FakeTime()
    stream = UnreachableFor(time, {0.5: 10}, down=2, up=100)
    loop = follow_stream(stream, ContinuousSettings(commit_interval_ms=1000), lambda w: None, None,
                         clock=time.clock, wait=time.sleep, outage_timeout_s=5)
    assert next(loop).position == 10
    with pytest.raises(Unreachable, match="did not answer while reading the progress"):
        next(loop)
    assert time.now == 7 and stream.stopped_at == 7  # 5 s after the first read that failed
