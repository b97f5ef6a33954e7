"""Peak resident memory of this process and all its descendants (JVM, Spark's Python workers).

Sampled from /proc because getrusage only reports children that have exited.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def tree_rss_bytes(root: int, exclude: frozenset[int] = frozenset()) -> int:
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if pid in exclude:
            continue
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
        stack += _children(pid)
    return total


class PeakMemory(threading.Thread):
    def __init__(self, exclude: frozenset[int] = frozenset(), interval_s: float = 0.2):
        super().__init__(daemon=True)
        self._exclude = exclude
        self.peak = 0
        self._interval = interval_s
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self._interval):
            self.peak = max(self.peak, tree_rss_bytes(os.getpid(), self._exclude))

    def __enter__(self) -> "PeakMemory":
        self.peak = tree_rss_bytes(os.getpid(), self._exclude)
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join()
