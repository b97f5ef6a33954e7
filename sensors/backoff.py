"""A failing bridge is tried less and less often (exponential, capped), and each tick says why.

Two signals: the sensor's own check failing (a system it asks is unreachable), kept in the sensor's
cursor; and the bridge's latest runs failing one after another, read from the run records.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from dagster import DagsterRunStatus, RunRequest, RunsFilter, SensorEvaluationContext, SkipReason

MAX_BACKOFF_S = 600
_LOOKBACK_RUNS = 8


def backoff_delay_s(failures: int, interval_s: int) -> int:
    """interval, 2x, 4x, ... per consecutive failure, at most MAX_BACKOFF_S."""
    return min(interval_s * 2 ** max(failures - 1, 0), MAX_BACKOFF_S)


def _failed_runs_in_a_row(context: SensorEvaluationContext, job_name: str) -> tuple[int, float | None]:
    records = context.instance.get_run_records(RunsFilter(job_name=job_name), limit=_LOOKBACK_RUNS)
    failed = 0
    for record in records:
        if record.dagster_run.status != DagsterRunStatus.FAILURE:
            break
        failed += 1
    last_end = records[0].end_time if failed else None
    return failed, last_end


def evaluate_with_backoff(context: SensorEvaluationContext, job_name: str, interval_s: int,
                          evaluate: Callable[[], RunRequest | SkipReason]) -> RunRequest | SkipReason:
    now = time.time()
    state = json.loads(context.cursor) if context.cursor else {}
    if now < state.get("retry_at", 0):
        return SkipReason(f"backing off: {state['reason']} ({state['failures']} checks failed in a row); "
                          f"next check in {state['retry_at'] - now:.0f} s")
    failed_runs, last_end = _failed_runs_in_a_row(context, job_name)
    if failed_runs and last_end is not None:
        wait = backoff_delay_s(failed_runs, interval_s)
        if now < last_end + wait:
            return SkipReason(f"backing off: the last {failed_runs} runs of this bridge failed; next run "
                              f"no sooner than {last_end + wait - now:.0f} s from now (see the failed run's error)")
    try:
        result = evaluate()
    except Exception as exc:  # the sensor's check itself failed: a system it asks did not answer
        failures = state.get("failures", 0) + 1
        delay = backoff_delay_s(failures, interval_s)
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        context.update_cursor(json.dumps({"failures": failures, "retry_at": now + delay, "reason": reason}))
        return SkipReason(f"check failed ({reason}); next check in {delay} s ({failures} failed in a row)")
    if state:
        context.update_cursor(None)
    return result
