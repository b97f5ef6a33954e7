"""The failures a user reads: one line naming what failed and where (system, topic, partition,
offset), shown as the run's failure with no client or JVM trace behind it."""

from __future__ import annotations

import importlib
import re


class BatchError(Exception):
    """A batch failed for a reason stated in full by its one-line message."""


# A task's BatchError reaches the driver inside Spark's error text (the task's Python traceback, wrapped
# by the JVM). Its last line names the exception by module and class: that line is the one to show.
_TASK_ERROR = re.compile(r"^(connectors(?:\.\w+)+)\.(\w+): ([^\n]+)$", re.MULTILINE)


def batch_error_in(text: str) -> BatchError | None:
    """The last BatchError a Spark task raised, rebuilt from Spark's error text; None if there is none."""
    for module_name, class_name, line in reversed(_TASK_ERROR.findall(text)):
        try:
            cls = getattr(importlib.import_module(module_name), class_name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, BatchError):
            return BatchError(line.strip())
    return None
