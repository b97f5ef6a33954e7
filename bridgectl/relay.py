"""The terminal of `bridgectl dev`: dagster dev's output relayed line by line, and our own lines, written so
that a terminal or pipe that went away (`run-local | tee log` ended by Ctrl-C: tee dies first) never stops
the shutdown that follows."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import IO

from rich.console import Console

_console = Console(stderr=True, soft_wrap=True)


def say(line: str) -> None:
    """One of our own lines (rich markup) on stderr; dropped if stderr is gone."""
    try:
        _console.print(line)
    except (BrokenPipeError, OSError):
        pass


class StackTraceFolder:
    """Folds the indented body of a Dagster event's "Stack Trace:" block into one line naming the log.

    Why: when Ctrl-C interrupts runs in flight, dagster dev prints each one's RUN_FAILURE with a stack
    trace of some seventy lines of Dagster internals; the event line and the error's name stay on the
    terminal, the trace goes only to the log file."""

    def __init__(self, log_path: Path):
        self._pointer = f"  (stack trace in {log_path})\n".encode()
        self._in_trace = False

    def terminal_line(self, line: bytes) -> bytes | None:
        """What the terminal shows for this line of output: the line, the pointer, or nothing."""
        if self._in_trace and line[:1] in (b" ", b"\t"):
            return None
        self._in_trace = line.strip() == b"Stack Trace:"
        return self._pointer if self._in_trace else line


class OutputRelay(threading.Thread):
    """Copies a child's output to our stdout (stack traces folded) and, all of it, to a log file. Once stdout
    is gone it keeps draining into the file only, so the child never blocks on a full pipe or fails writing
    to a dead one."""

    def __init__(self, source: IO[bytes], log_path: Path):
        super().__init__(name="output-relay", daemon=True)
        self._source = source
        self._log_path = log_path
        self._to_stdout = True

    def run(self) -> None:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        folder = StackTraceFolder(self._log_path)
        with open(self._log_path, "ab") as log:
            for line in iter(self._source.readline, b""):
                log.write(line)
                log.flush()
                shown = folder.terminal_line(line)
                if self._to_stdout and shown is not None:
                    try:
                        sys.stdout.buffer.write(shown)
                        sys.stdout.buffer.flush()
                    except (BrokenPipeError, OSError):
                        self._to_stdout = False
