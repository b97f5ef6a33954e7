"""Interrupts a run's Spark Connect operations when the run's process dies.

A Spark Connect server goes on executing an operation whose client has gone (the client could reattach),
so a killed run would go on publishing a batch that it can never record, and the next run would publish
it again. The run starts this watchdog as a separate process in a session of its own (so that killing
the run's process group does not reach it) and holds the write end of its stdin: the line "done" means
the batch ended; end of file without it means the run died, and the watchdog interrupts every operation
tagged with the run. The Connect URL, which may carry a token, travels over the pipe and never in argv.
A Kafka-reading batch's tasks stop sooner on their own, through the batch's lease (spark_read.py); the watchdog
stops every other batch (the sources') and any task the lease could not reach.

Only the standard library is imported until the run dies: a watchdog costs a bare interpreter per run.
"""

from __future__ import annotations

import subprocess
import sys


class InterruptWatchdog:
    """Held by a run for the length of its batch; `disarm()` when the batch has ended either way."""

    def __init__(self, connect_url: str, tag: str):
        self._process = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, text=True,
        )
        self._process.stdin.write(f"{connect_url}\n{tag}\n")
        self._process.stdin.flush()

    def disarm(self) -> None:
        try:
            self._process.stdin.write("done\n")
            self._process.stdin.close()
        except OSError:  # the watchdog itself was killed: nothing to disarm
            pass
        self._process.wait(timeout=10)


def _watch() -> None:
    url, tag = sys.stdin.readline().strip(), sys.stdin.readline().strip()
    if "done" in sys.stdin.read():  # blocks until the run closes the pipe, or dies
        return
    from pyspark.sql import SparkSession

    SparkSession.builder.remote(url).create().interruptTag(tag)


if __name__ == "__main__":
    _watch()
