"""Peak resident memory and CPU time of this process and all its descendants (JVM, Spark's Python workers).

Sampled from /proc because getrusage only reports children that have exited.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path


def children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def tree(*roots: int, excluded: frozenset[int] = frozenset()) -> list[int]:
    """These processes and all their descendants alive now, each once, without the trees of `excluded`."""
    found, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        if pid not in found and pid not in excluded:
            found.append(pid)
            stack += children(pid)
    return found


def is_jvm(pid: int) -> bool:
    """Whether the process is a java one (raises OSError once it has exited)."""
    return Path(f"/proc/{pid}/comm").read_text().strip() == "java"


def tree_rss_by_kind(root: int) -> Counter:
    """Resident bytes of a process tree, split into `jvm` (java processes) and `python` (the rest)."""
    total: Counter = Counter()
    for pid in tree(root):
        try:
            kind = "jvm" if is_jvm(pid) else "python"
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total[kind] += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


class PeakMemory(threading.Thread):
    """Peak of this process tree (or `root`'s) plus the trees of `also` (e.g. a Spark Connect server):
    `peak` of the sum, `peak_by_kind` of the JVM and the Python processes each, and `also_at_start`, what the
    trees of `also` held when it started (a shared server's resident memory before this run's work)."""

    def __init__(self, also: tuple[int, ...] = (), interval_s: float = 0.2, root: int | None = None):
        super().__init__(daemon=True)
        self._root = os.getpid() if root is None else root
        self._also = also
        self.peak = 0
        self.peak_by_kind: Counter = Counter()
        self.also_at_start = 0
        self._interval = interval_s
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self._interval):
            self._sample()

    def _sample(self) -> None:
        sample = tree_rss_by_kind(self._root)
        for pid in self._also:
            sample.update(tree_rss_by_kind(pid))
        self.peak = max(self.peak, sum(sample.values()))
        self.peak_by_kind = Counter({k: max(self.peak_by_kind[k], sample[k]) for k in ("jvm", "python")})

    def __enter__(self) -> "PeakMemory":
        self.also_at_start = sum(sum(tree_rss_by_kind(pid).values()) for pid in self._also)
        self._sample()
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join()


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _own_cpu(pid: int) -> tuple[int, int] | None:
    """(start time, user + system clock ticks of the process's threads): its own CPU, not its reaped children's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[19]), int(fields[11]) + int(fields[12])  # stat's fields 22 (starttime), 14 and 15


class TreeCpu(threading.Thread):
    """CPU seconds used since it was entered by every process of these trees, those that exit meanwhile included.

    Why not the trees' sums before and after: a process that exits in between takes all its CPU, from before the
    measurement too, out of the second sum, and counting what the tree's processes reaped did not bring it back
    (measured in `bench.sustained`: the previous row's idle Python worker, 9 s of CPU, exited during the next row,
    whose before/after sum then read 1.62 s against 10.83 s here; pyspark's worker daemon, for one, exits without
    waiting for its workers when Spark stops it). Here each process's own CPU is sampled every `interval_s` and its
    last reading kept after it is gone: at most an interval of an exiting process's CPU goes uncounted, and a
    process that lived less than an interval is not seen (Spark's Python workers, the JVMs and the run processes
    live for seconds at least).

    `excluded`: processes whose trees are not counted though they descend from a root: the services of a stack the
    bench process started itself (its Kafka brokers' CPU is not the bridge's)."""

    def __init__(self, *roots: int, interval_s: float = 0.25, excluded: tuple[int, ...] = ()):
        super().__init__(daemon=True)
        self._roots, self._interval = roots, interval_s
        self._excluded = frozenset(excluded) - frozenset(roots)
        self._lock = threading.Lock()
        self._first: dict[tuple[int, int], int] = {}  # (pid, start time) -> ticks when first seen
        self._last: dict[tuple[int, int], int] = {}
        self._entered = False
        self._done = threading.Event()

    def _sample(self) -> None:
        with self._lock:
            for pid in tree(*self._roots, excluded=self._excluded):
                own = _own_cpu(pid)
                if own is None:
                    continue
                key = (pid, own[0])
                # A process alive at the start counts from there; one born later, all its CPU.
                self._first.setdefault(key, own[1] if not self._entered else 0)
                self._last[key] = own[1]

    def run(self) -> None:
        while not self._done.wait(self._interval):
            self._sample()

    def seconds(self) -> float:
        """CPU seconds since entering, up to now."""
        return sum(self.by_process().values())

    def by_process(self) -> dict[int, float]:
        """CPU seconds since entering, up to now, per process id (one that exited included)."""
        self._sample()
        used: Counter = Counter()
        with self._lock:
            for (pid, start), first in self._first.items():
                used[pid] += (self._last[(pid, start)] - first) / _CLOCK_TICKS
        return dict(used)

    def __enter__(self) -> "TreeCpu":
        self._sample()
        self._entered = True
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join()
