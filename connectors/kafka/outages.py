"""A Kafka that does not answer, seen by the admin client, a producer or the reader in the task, as the one-line
`Unreachable` (connectors/outage.py) naming the brokers and what was being read or written."""

from __future__ import annotations

import contextlib
import re
from typing import Iterable, Iterator

from confluent_kafka import KafkaError, KafkaException

from connectors.kafka.admin import PartitionRange
from connectors.outage import Unreachable

# Spark's Kafka consumer gives up with this message (no topic or partition in it) once
# `kafkaConsumer.pollTimeoutMs` has passed without the record it needs.
_SPARK_KAFKA_TIMEOUT = re.compile(r"Cannot fetch record for offset (\d+) in (\d+) milliseconds")


def kafka_read_timeout(exc: BaseException, bootstrap_servers: str, ranges: Iterable[PartitionRange]) -> Unreachable | None:
    """The one-line error for a Spark Kafka read that timed out, or None if `exc` is something else."""
    match = _SPARK_KAFKA_TIMEOUT.search(str(exc))
    if match is None:
        return None
    offset, waited_ms = int(match.group(1)), int(match.group(2))
    # Spark names only the offset: the partitions whose range holds it are the candidates.
    candidates = [r for r in ranges if r.start <= offset < r.end]
    where = ", ".join(f"topic {r.topic} partition {r.partition}" for r in candidates) or "the batch's partitions"
    return Unreachable(f"Kafka at {bootstrap_servers} did not answer for {waited_ms / 1000:.0f} s while reading "
                       f"{where} at offset {offset}; the run recorded nothing")


# What librdkafka reports while the brokers do not answer (it retries them itself).
KAFKA_UNREACHABLE_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT,
    KafkaError._RESOLVE,
})


@contextlib.contextmanager
def kafka_outages_named(bootstrap_servers: str, doing: str, ranges: list[PartitionRange] | None = None) -> Iterator[None]:
    """Turn a Kafka that does not answer, seen by the admin client or by Spark's reader, into `Unreachable`."""
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
    except Exception as exc:
        named = kafka_read_timeout(exc, bootstrap_servers, ranges or [])
        if named is None:
            raise
        raise named from None
