"""bridgectl dev's terminal: a Dagster stack trace is folded into one line; everything else passes."""

from pathlib import Path

from bridgectl.relay import StackTraceFolder

FAILURE = b"""2026-11-24 06:35:05 +0000 - dagster - ERROR - job - run - RUN_FAILURE - Execution was interrupted.

dagster._core.errors.DagsterExecutionInterruptedError

Stack Trace:
  File "/x/dagster/_core/execution/api.py", line 742, in job_execution_iterator
    for event in job_context.executor.execute(job_context, execution_plan):
  File "/x/dagster/_utils/interrupts.py", line 81, in _new_signal_handler
    raise error_cls()

2026-11-24 06:35:06 +0000 - dagster - INFO - job - run - 20 records read, 20 published in 0.4s
  indented text outside a trace stays
"""


def test_a_stack_trace_becomes_one_line_naming_the_log():
    folder = StackTraceFolder(Path("/logs/dagster-dev.log"))
    shown = [folder.terminal_line(line) for line in FAILURE.splitlines(keepends=True)]
    assert b"".join(s for s in shown if s is not None).decode() == (
        "2026-11-24 06:35:05 +0000 - dagster - ERROR - job - run - RUN_FAILURE - Execution was interrupted.\n"
        "\n"
        "dagster._core.errors.DagsterExecutionInterruptedError\n"
        "\n"
        "  (stack trace in /logs/dagster-dev.log)\n"
        "\n"
        "2026-11-24 06:35:06 +0000 - dagster - INFO - job - run - 20 records read, 20 published in 0.4s\n"
        "  indented text outside a trace stays\n")
