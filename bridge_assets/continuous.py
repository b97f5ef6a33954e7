"""Continuous mode: one long-lived run keeps moving records and records the position every commit interval.

A bridge whose connector streams its config (`ConnectorPlugin.has_stream`) moves records as they arrive, and the
run reads the stream's progress every commit interval (`follow_stream`); any other loops micro-batches
(`loop_batches`).

Between commits the batches moved are added up in a `CommitWindow`; a commit is one materialization of
the bridge's asset carrying the position after the window's last batch (every record before it was
acknowledged by the target) and the window's totals. A run killed between commits moves the window's
records again (at least once, as with one batch per run); nothing is lost.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from connectors.bridge import ContinuousSettings
from connectors.outage import Unreachable
from connectors.plugin import BatchReport, Stream


@dataclass(frozen=True)
class Commit:
    position: Any  # where the next batch starts
    values: dict[str, Any]
    line: str
    final: bool = False  # the loop's clean end: the run's own result
    moved: int = 0  # records (or messages) moved since the last commit


@dataclass
class CommitWindow:
    """The micro-batches moved since the position was last recorded."""

    opened_at: float  # monotonic seconds
    unit: str = "micro-batches"  # what `batches` counts, in the line
    batches: int = 0
    moved: int = 0
    sums: dict[str, int | dict[str, int]] = field(default_factory=dict)
    last: BatchReport | None = None

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        self.moved += report.moved
        for name in report.counters:
            value = report.values[name]
            if isinstance(value, dict):  # counts by bucket (a latency histogram): added bucket by bucket
                summed = self.sums.setdefault(name, {})
                for bucket, n in value.items():
                    summed[bucket] = summed.get(bucket, 0) + n
            else:
                self.sums[name] = self.sums.get(name, 0) + value
        self.last = report

    def commit(self, now: float, final: bool = False) -> Commit:
        """The last batch's position and values (lag, partitions) with the window's totals and rate."""
        assert self.last is not None, "an empty window records nothing"
        seconds = max(now - self.opened_at, 1e-6)
        values = {
            **self.last.values,
            **self.sums,
            "duration_seconds": round(seconds, 3),
            "records_per_second": round(self.moved / seconds, 1),
            "micro_batches": self.batches,
        }
        return Commit(self.last.position, values, self._line(seconds), final, self.moved)

    def _line(self, seconds: float) -> str:
        if not self.batches:
            return f"nothing moved in the last {seconds:.1f}s"
        return (f"{self.moved} moved in {self.batches} {self.unit} over {seconds:.1f}s "
                f"({self.moved / seconds:.0f}/s); last: {self.last.line}")


def loop_batches(
    move: Callable[[Any], BatchReport],
    pending: Callable[[Any], bool],
    position: Any,
    settings: ContinuousSettings,
    on_warning: Callable[[str], None],
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] | None = None,
) -> Iterator[Commit]:
    """Move micro-batches until `max_run_minutes` or `stop` is set, yielding a Commit at most every commit
    interval and a last one when the loop ends; an exception (a failed batch) first yields the commit of
    what was moved before it, then goes on up. The first batch moves without asking `pending`; a batch
    that moved records is followed at once, an empty look waits the trigger interval (or until `stop`)."""
    stop = stop or threading.Event()
    sleep = sleep or stop.wait
    trigger_s, commit_s = settings.trigger_interval_ms / 1000, settings.commit_interval_ms / 1000
    deadline = clock() + settings.max_run_minutes * 60
    window, latest = CommitWindow(clock()), None  # latest: the last batch's outcome, empty or not
    look_first = False
    try:
        while latest is None or (clock() < deadline and not stop.is_set()):
            started = clock()
            if not look_first or pending(position):
                latest = move(position)
                if latest.moved or latest.position != position:  # an empty batch is not worth a commit
                    window.add(latest)
                position = latest.position
                for warning in latest.warnings:
                    on_warning(warning)
                look_first = latest.moved == 0
            else:
                look_first = True
            now = clock()
            if window.batches and now - window.opened_at >= commit_s:
                yield window.commit(now)
                window = CommitWindow(now)
            if look_first:
                sleep(max(0.0, trigger_s - (clock() - started)))
    except GeneratorExit:  # the consumer stopped listening: nothing can be yielded any more
        raise
    except BaseException:
        if window.batches:
            yield window.commit(clock())
        raise
    if not window.batches:  # a clean end records once more, with nothing new moved since the last commit
        nothing = {name: {} if isinstance(latest.values[name], dict) else 0 for name in latest.counters}
        window = CommitWindow(window.opened_at, sums=nothing, last=latest)
    now = clock()
    yield window.commit(now, final=True)


# A stream opened on a backlog delivers its first records within seconds, but a read every commit interval showed them
# up to an interval later: at thirty bridges on a busy machine, every bridge's first records showed only at its second
# read, 12-14 s after the host's run started. Reading quickly until they show costs a few reads per bridge; a quick
# read that finds nothing moved records nothing, so a host's thirty first records are not queued behind thirty
# observations on the run's main thread, which records every commit.
QUICK_READ_S = 1.0
QUICK_READS_FOR_S = 30.0


def follow_stream(
    stream: Stream,
    settings: ContinuousSettings,
    on_warning: Callable[[str], None],
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    wait: Callable[[float], object] | None = None,
    outage_timeout_s: float = 0.0,
) -> Iterator[Commit]:
    """Reads the stream's progress every commit interval until `max_run_minutes` or `stop`, yielding a Commit
    when it moved something (or its position moved), and a last one after stopping it. Until its first records
    show, for at most `QUICK_READS_FOR_S` after it opened, it reads every `QUICK_READ_S` (a read that finds only its
    position, nothing moved, is recorded a commit interval after the last as before). A failed stream first
    yields the commit of what it moved before failing, then its error goes on up. A read that finds a system
    unreachable is tried again at the next interval while the stream goes on, until `outage_timeout_s` (the bridge's
    batch.outage_timeout_seconds, the bound a batch has too) have passed since the first such read."""
    stop = stop or threading.Event()
    wait = wait or stop.wait
    commit_s = settings.commit_interval_ms / 1000
    quick_s, quick_until = min(QUICK_READ_S, commit_s), clock() + QUICK_READS_FOR_S
    deadline = clock() + settings.max_run_minutes * 60
    window = CommitWindow(clock(), unit="progress reads")
    recorded = object()  # the position last committed: none yet

    def read() -> None:
        report = stream.progress()
        window.add(report)
        for warning in report.warnings:
            on_warning(warning)

    unreachable_since: float | None = None
    try:
        while not stop.is_set() and clock() < deadline:
            quick = clock() < quick_until
            wait(max(0.0, min(quick_s if quick else commit_s, deadline - clock())))
            if stop.is_set():
                break
            try:
                read()
            except Unreachable as exc:
                # A broker restarted under the stream: its group coordinator answered reads of the commits only
                # after 30 s and more of reloading (the admin calls' own retries), while the stream's tasks rode it out.
                if unreachable_since is None:
                    unreachable_since = clock()
                    said = str(exc).removesuffix("; the run recorded nothing")
                    on_warning(f"its progress could not be read ({said}); the stream goes on, and the read is tried "
                               f"again at each commit interval for up to {outage_timeout_s:g} s")
                if clock() - unreachable_since >= outage_timeout_s:
                    raise
                continue
            unreachable_since = None
            position_only = window.last.position != recorded and (
                not quick or clock() - window.opened_at >= commit_s)
            if window.moved or position_only:
                if window.moved:  # its first records showed: a read every commit interval from now on
                    quick_until = clock()
                yield window.commit(clock())
                recorded, window = window.last.position, CommitWindow(clock(), unit="progress reads")
            stream.raise_if_ended()
    except GeneratorExit:  # the consumer stopped listening: nothing can be yielded any more
        stream.stop()
        raise
    except BaseException:
        stream.stop()
        with contextlib.suppress(Exception):
            read()  # what the stream committed before it failed
        if window.batches and (window.moved or window.last.position != recorded):
            yield window.commit(clock())
        raise
    stream.stop()
    read()
    yield window.commit(clock(), final=True)


@contextlib.contextmanager
def termination_sets(stop: threading.Event) -> Iterator[None]:
    """Inside, a termination (SIGINT or SIGTERM: what Dagster's run termination and Ctrl-C send) sets
    `stop`, so the loop ends after the micro-batch in progress and records its position, instead of
    throwing that batch away mid-flight (its records would then be moved again). A second signal goes to
    the handler that was there before (Dagster's, which interrupts at once). Dagster installs its own
    handler each time it resumes the asset's body, so this is entered around each step of the loop."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handle(signum, frame):
        if stop.is_set() and callable(before[signum]):
            before[signum](signum, frame)
        stop.set()

    for sig in before:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def commits_until_terminated(commits: Iterator[Commit], stop: threading.Event) -> Iterator[Commit]:
    """The loop's commits, the loop itself running with `termination_sets(stop)` and the consumer without."""
    while True:
        with termination_sets(stop):
            commit = next(commits, None)
        if commit is None:
            return
        yield commit
