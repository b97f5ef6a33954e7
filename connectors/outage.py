"""A system that does not answer fails the run within the bridge's `batch.outage_timeout_seconds`, with
one line naming the system, its address and what was being read or written -- not a silent wait
followed by a JVM stack trace. Kafka's own: connectors/kafka/outages.py."""

from __future__ import annotations

import contextlib
from typing import Iterator

from connectors.errors import BatchError, batch_error_in


class Unreachable(BatchError):
    """One line: which system at which address did not answer, doing what."""


@contextlib.contextmanager
def spark_connect_outages_named(address: str) -> Iterator[None]:
    """A Spark Connect server that does not answer, or refuses the token, as `Unreachable`.
    `address` must be the URL without its token (spark_session.without_secrets)."""
    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    try:
        yield
    except SparkConnectGrpcException as exc:
        # pyspark 4.1+ raises the last gRPC error once its retries (spark_session.CONNECT_RETRIES) run out
        if exc.getGrpcStatusCode() == grpc.StatusCode.UNAVAILABLE:
            raise Unreachable(f"Spark Connect at {address} did not answer (retried for about 35 s); "
                              "the run recorded nothing") from None
        if "UNAUTHENTICATED" not in str(exc):
            raise
        raise Unreachable(f"Spark Connect at {address} refused the run's token (the Spark resource's remote_token, "
                          "BRIDGE_SPARK_REMOTE_TOKEN); the run recorded nothing") from None


@contextlib.contextmanager
def outages_named(system: str, address: str, doing: str, unanswered: tuple[type[BaseException], ...]) -> Iterator[None]:
    """An error of `unanswered` types (the system is down or silent) raised inside, as `Unreachable`."""
    try:
        yield
    except unanswered as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unreachable(f"{system} at {address} did not answer while {doing}: {reason}; "
                          "the run recorded nothing") from None


def google_unanswered() -> tuple[type[BaseException], ...]:
    """What google-api-core clients (Pub/Sub, Lite admin) raise when the service is down or silent."""
    from google.api_core import exceptions

    return exceptions.ServiceUnavailable, exceptions.DeadlineExceeded, exceptions.RetryError


def s3_unanswered() -> tuple[type[BaseException], ...]:
    """What botocore raises when S3 is down or silent (after its own retries)."""
    from botocore import exceptions

    return (exceptions.EndpointConnectionError, exceptions.ConnectTimeoutError, exceptions.ReadTimeoutError,
            exceptions.ConnectionClosedError)


def lite_outages_named(connection, location, doing: str):
    return outages_named("Pub/Sub Lite", connection.address_of(location), doing, google_unanswered())


@contextlib.contextmanager
def task_errors_named() -> Iterator[None]:
    """A Spark job that failed because a task raised a BatchError (Unreachable, a record that failed
    under errors.tolerance=none, ...), as that task's one line."""
    try:
        yield
    except BatchError:
        raise
    except Exception as exc:
        named = batch_error_in(str(exc))
        if named is None:
            raise
        raise named from None
