"""Children that hear the SIGINT we send them, however we were started."""

from __future__ import annotations

import signal


def hear_sigint() -> None:
    """A `preexec_fn` for a child we stop with SIGINT (`dagster dev`): a shell that starts us in the background
    (`&`) sets SIGINT to ignored, children inherit that, and `dagster dev`, unlike a Dagster run, installs no handler
    of its own, so it would never hear it (and be killed after a timeout instead)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
