"""The console logger of every run of the code location (its Definitions' default, so also of `dagster asset
materialize`, `dg launch` and the UI's ad hoc runs): Dagster's colored console logger, at INFO unless the run's
config says otherwise, printing a bridge's failure as its one line."""

from __future__ import annotations

import logging

import dagster as dg


def _failure_in_one_line(record: logging.LogRecord) -> bool:
    """A bridge's `Failure` (bridge_assets/factory.py) is a line written for the user, naming the bridge, the system
    and the cause; the stack under it is Dagster's own frames and the raise, and the cause's trace is the failure's
    `trace` metadata in the UI. Any other error is not ours to word, and keeps its stack."""
    event = (getattr(record, "dagster_meta", None) or {}).get("dagster_event")
    error = getattr(getattr(event, "event_specific_data", None), "error", None)
    if error is not None and error.cls_name == "Failure" and isinstance(record.msg, str):
        head = record.msg.split("\n\n", 1)[0]
        line = error.message.strip().removeprefix(f"{dg.Failure.__module__}.Failure: ")
        record.msg, record.args = f"{head} {line}", ()
    return True


@dg.logger(config_schema=dg.colored_console_logger.config_schema,
           description="Dagster's colored console logger, at INFO by default; a bridge's failure is one line")
def console_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    config = {"log_level": "INFO", **(init_context.logger_config or {})}
    console = dg.colored_console_logger.logger_fn(dg.build_init_logger_context(logger_config=config))
    for handler in console.handlers:
        handler.addFilter(_failure_in_one_line)
    return console
