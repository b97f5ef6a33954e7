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


def tree_rss_by_kind(root: int) -> Counter:
    """Resident bytes of a process tree, split into `jvm` (java processes) and `python` (the rest)."""
    total: Counter = Counter()
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            kind = "jvm" if Path(f"/proc/{pid}/comm").read_text().strip() == "java" else "python"
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total[kind] += int(line.split()[1]) * 1024
        except OSError:
            continue
        stack += children(pid)
    return total


class PeakMemory(threading.Thread):
    """Peak of this process tree plus the trees of `also` (e.g. a Spark Connect server):
    `peak` of the sum, `peak_by_kind` of the JVM and the Python processes each, and `also_at_start`, what the
    trees of `also` held when it started (a shared server's resident memory before this run's work)."""

    def __init__(self, also: tuple[int, ...] = (), interval_s: float = 0.2):
        super().__init__(daemon=True)
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
        sample = tree_rss_by_kind(os.getpid())
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


def tree_cpu_seconds(*roots: int) -> float:
    """User plus system CPU seconds of the live processes in these trees (all threads) and of the children they reaped,
    from /proc. The reaped ones count: Spark's Python workers come and go (an idle one exits), and a worker that
    exited during a measurement would otherwise take all its CPU, from before the measurement too, out of the sum."""
    total, stack, seen = 0, list(roots), set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            # utime, stime, cutime, cstime (fields 14 to 17 of stat): a process's own and its reaped children's
            total += sum(int(field) for field in fields[11:15])
        except (OSError, IndexError):
            continue
        stack += children(pid)
    return total / _CLOCK_TICKS
