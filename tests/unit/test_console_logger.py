"""The code location's console logger prints a bridge's Failure as its one line, and any other error with its
stack (ours to word or not)."""

from __future__ import annotations

import dagster as dg

from bridge_assets.console_logger import console_logger
from jobs import CONSOLE_LOGGER


def _console_of_a_failing_run(capfd, error: Exception) -> str:
    @dg.asset
    def failing():
        raise error

    job = dg.Definitions(assets=[failing], loggers={"console": console_logger}).resolve_implicit_global_asset_job_def()
    assert not job.execute_in_process(run_config=CONSOLE_LOGGER, raise_on_error=False).success
    return capfd.readouterr().err


def test_a_bridges_failure_is_one_line_under_its_event(capfd):
    console = _console_of_a_failing_run(capfd, dg.Failure(description="bridge b (Kafka t -> s3://x/): Kafka at k:1 "
                                                                      "did not answer; the run recorded nothing"))
    [step] = [line for line in console.splitlines() if "STEP_FAILURE" in line]
    assert step.endswith('Execution of step "failing" failed. bridge b (Kafka t -> s3://x/): Kafka at k:1 did not '
                         "answer; the run recorded nothing")
    assert "Stack Trace" not in console and "Traceback" not in console and "DEBUG" not in console


def test_any_other_error_keeps_its_stack(capfd):
    console = _console_of_a_failing_run(capfd, ZeroDivisionError("a bug"))
    assert "ZeroDivisionError: a bug" in console and "Stack Trace" in console
