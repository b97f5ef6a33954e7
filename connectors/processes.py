"""Whether a process is still the one we started: its start time, so that a reused pid is not taken for it."""

from __future__ import annotations

import os
from pathlib import Path


def process_start_ticks(pid: int) -> int | None:
    """Start time of a live process, None when it is gone (or exited and awaits its parent)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child that exited
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name (which may hold spaces): state, ..., starttime (22).
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])
