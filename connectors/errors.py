"""The failures a user reads: one line naming what failed and where (system, topic, partition,
offset), shown as the run's failure with no client or JVM trace behind it."""

from __future__ import annotations

import importlib
import re


class BatchError(Exception):
    """A batch failed for a reason stated in full by its one-line message."""


class RecordRefused(BatchError):
    """A record that can never be delivered as it is (a poison record met under errors.tolerance=none): work that
    meets it fails on it again each time it is started again."""


class RecordError(RecordRefused, ValueError):
    """This record can never become a valid message (a poison record)."""

    stage = "VALUE_CONVERTER"  # Kafka Connect's stage named in a dead letter's context headers


class DeliveryAbandoned(Exception):
    """A writer stopped waiting on its destination because its task must stop (the run's lease lapsed): what it had
    not sent is dropped, and the task fails as its lease says."""


# How often a writer waiting on its destination (room in its queue, acknowledgments) asks whether to go on, when it
# is told how: a killed run's queued records stop reaching the destination within this of its lease's lapse.
KEEP_GOING_LOOK_S = 0.05


# A task's BatchError reaches the driver inside Spark's error text (the task's Python traceback, wrapped
# by the JVM). Its last line names the exception by module and class: that line is the one to show.
_TASK_ERROR = re.compile(r"^(connectors(?:\.\w+)+)\.(\w+): ([^\n]+)$", re.MULTILINE)


def batch_error_in(text: str) -> BatchError | None:
    """The last BatchError a Spark task raised, rebuilt from Spark's error text (a RecordRefused as one); None if
    there is none."""
    for module_name, class_name, line in reversed(_TASK_ERROR.findall(text)):
        try:
            cls = getattr(importlib.import_module(module_name), class_name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, BatchError):
            return (RecordRefused if issubclass(cls, RecordRefused) else BatchError)(line.strip())
    return None


def is_record_refused(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it (a Spark task's error among them), is a RecordRefused."""
    return any(isinstance(link, RecordRefused) or isinstance(batch_error_in(str(link)), RecordRefused)
               for link in _chain(exc))


def _chain(exc: BaseException | None) -> list[BaseException]:
    """`exc` and its causes and contexts, outermost first."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


# The last "package.module.SomeError: message" line of a Python traceback carried inside another
# exception's text (Spark wraps a task's traceback in its own error, often twice).
_TRACEBACK_LAST_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)): (.+)$",
                                  re.MULTILINE)

# Which system an exception's module speaks for, most specific first.
_SYSTEMS = (("google.auth", "GCP credentials"), ("google.cloud.pubsublite", "Pub/Sub Lite"),
            ("google.cloud.pubsub", "Pub/Sub"), ("google.api_core", "Google API"), ("grpc", "gRPC"),
            ("confluent_kafka", "Kafka"), ("botocore", "AWS"), ("boto3", "AWS"), ("pyspark", "Spark"),
            ("py4j", "Spark"))


def root_cause(exc: BaseException) -> tuple[str | None, str]:
    """(system or None, "ErrorClass: first line") of what made `exc` happen: a BatchError's own line, or
    the innermost exception, looked for also inside Spark's error text."""
    if isinstance(exc, BatchError):
        return None, str(exc)
    chain = _chain(exc)
    for link in chain:
        if named := batch_error_in(str(link)):
            return None, str(named)
    innermost = chain[-1]
    text = str(innermost)
    # Spark's text: its own (JVM) lines, then the task's Python traceback; that traceback ends in the cause.
    lines = _TRACEBACK_LAST_LINE.findall(text.rsplit("Traceback (most recent call last):", 1)[-1])
    if lines:
        qualified, message = lines[0] if "Traceback (most recent call last):" in text else lines[-1]
    else:
        qualified = f"{type(innermost).__module__}.{type(innermost).__qualname__}"
        message = str(innermost).strip().splitlines()[0] if str(innermost).strip() else ""
    system = next((name for prefix, name in _SYSTEMS if qualified.startswith(prefix + ".")), None)
    return system, f"{qualified.rsplit('.', 1)[-1]}: {message}" if message else qualified.rsplit(".", 1)[-1]
