"""A Kafka that does not answer, seen by the admin client, a producer or the reader in the task, as the one-line
`Unreachable` (connectors/outage.py) naming the brokers and what was being read or written."""

from __future__ import annotations

import contextlib
from typing import Iterator

from confluent_kafka import KafkaError, KafkaException

from connectors.outage import Unreachable

# What librdkafka reports while the brokers do not answer (it retries them itself).
KAFKA_UNREACHABLE_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT,
    KafkaError._RESOLVE,
})


@contextlib.contextmanager
def kafka_outages_named(bootstrap_servers: str, doing: str) -> Iterator[None]:
    """Turn a Kafka that does not answer, seen by an admin client or a producer, into `Unreachable`. (A task's
    reader raises its own, naming the partition and offset: range_reader.)"""
    from google.api_core.exceptions import RetryError

    try:
        yield
    except (KafkaException, RetryError) as exc:
        # An admin call's retries (admin.retry_transient) that ran out end in a RetryError with the last error in it.
        kafka_exc = exc.cause if isinstance(exc, RetryError) else exc
        error = (kafka_exc.args[0] if isinstance(kafka_exc, KafkaException) and kafka_exc.args
                 and isinstance(kafka_exc.args[0], KafkaError) else None)
        if error is None or error.code() not in KAFKA_UNREACHABLE_CODES:
            raise
        raise Unreachable(f"Kafka at {bootstrap_servers} did not answer while {doing}: {error.str()}; "
                          "the run recorded nothing") from None
