"""Kafka Connect's dead-letter queue for sinks: the failed record as it was, plus error headers.

Header names are Kafka Connect's (DeadLetterQueueReporter), so existing DLQ tooling reads them.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from connectors.config.common import ErrorHandlingKeys, KafkaTopicsKeys
from connectors.errors import BatchError
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import client_logger, refused_for_good
from connectors.kafka.record import KafkaRecord

HEADER_PREFIX = "__connect.errors."
# Room for the error headers on top of the record itself (the stack trace alone is cut at 8 KiB).
HEADERS_ALLOWANCE = 64 * 1024
# librdkafka's ceiling for message.max.bytes.
PRODUCER_MAX_BYTES = 1_000_000_000


def dead_letter_client_config(kafka: KafkaAdmin, config: ErrorHandlingKeys) -> dict[str, str]:
    """Driver side, before a batch: the Kafka client settings a task's dead-letter producer uses.

    A poison record is often a large one, and it must fit where it goes: the dead-letter topic is
    created (or raised) to take the largest record any source topic can hold plus the error headers,
    and the producer is sized to match, instead of librdkafka's and the broker's 1 MB defaults.
    """
    client_config = kafka.connection.librdkafka_config()
    if not config.errors_deadletterqueue_topic_name:
        return client_config
    assert isinstance(config, KafkaTopicsKeys)
    sources = list(kafka.partitions(config.topic_list() or None, config.topics_regex))
    largest = max(kafka.topic_max_message_bytes(sources).values(), default=1_048_588)
    needed = min(largest + HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES)
    kafka.ensure_topic_takes(config.errors_deadletterqueue_topic_name, needed)
    return {**client_config, "message.max.bytes": str(needed)}


@dataclass(frozen=True)
class DeadLetterRefused:
    """A record that the dead-letter topic refused for good."""

    topic: str
    partition: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"topic {self.topic} partition {self.partition} offset {self.offset}: {self.reason}"


class DeadLetterQueue:
    """Created inside a Spark task (Kafka clients cannot be pickled); flush() before reporting success."""

    def __init__(self, topic: str, client_config: dict[str, str], connector_name: str, context_headers: bool):
        from confluent_kafka import Producer

        self.topic = topic
        self.connector_name = connector_name
        self.context_headers = context_headers
        self._errors: list[str] = []
        self._refused: list[tuple[KafkaRecord, dict, str]] = []  # (record, produce kwargs, reason)
        self._producer = Producer({**client_config, "enable.idempotence": True, "acks": "all", "log_level": 3,
                                   "logger": client_logger()})

    def send(self, record: KafkaRecord, stage: str, error: BaseException) -> None:
        headers = list(record.headers)
        if self.context_headers:
            headers += [
                (HEADER_PREFIX + "topic", record.topic.encode()),
                (HEADER_PREFIX + "partition", str(record.partition).encode()),
                (HEADER_PREFIX + "offset", str(record.offset).encode()),
                (HEADER_PREFIX + "connector.name", self.connector_name.encode()),
                (HEADER_PREFIX + "task.id", b"0"),
                (HEADER_PREFIX + "stage", stage.encode()),
                (HEADER_PREFIX + "exception.class.name", type(error).__name__.encode()),
                (HEADER_PREFIX + "exception.message", str(error).encode()),
                (HEADER_PREFIX + "exception.stacktrace",
                 "".join(traceback.format_exception(error)).encode()[:8192]),
            ]
        message = {"topic": self.topic, "key": record.key, "value": record.value, "headers": headers,
                   "timestamp": record.timestamp_ms or 0}
        self._produce(record, message, lambda err: self._failed(record, message, err))

    def _produce(self, record: KafkaRecord, message: dict, on_error) -> None:
        from confluent_kafka import KafkaException

        try:
            self._producer.produce(**message, on_delivery=lambda err, _msg: err is None or on_error(err))
        except KafkaException as exc:  # refused before sending (too large for the producer, say)
            on_error(exc.args[0])
        self._producer.poll(0)

    def _failed(self, record: KafkaRecord, message: dict, error) -> None:
        if refused_for_good(error):
            self._refused.append((record, message, error.str()))
        else:
            self._errors.append(f"{record.where}: {error.str()}")

    def flush(self, timeout_s: float = 60) -> list[DeadLetterRefused]:
        """Wait for every dead letter; the ones Kafka refused for good. Any other failure raises.

        The broker refuses a whole produce batch for one bad record in it, so each refused record is
        sent again on its own: only what is refused alone is reported."""
        remaining = self._producer.flush(timeout_s)
        refused: list[DeadLetterRefused] = []
        candidates, self._refused = self._refused, []
        for record, message, _reason in candidates:
            alone: list = []
            self._produce(record, message, alone.append)
            remaining += self._producer.flush(timeout_s)
            if alone and refused_for_good(alone[0]):
                refused.append(DeadLetterRefused(record.topic, record.partition, record.offset, alone[0].str()))
            elif alone:
                self._errors.append(f"{record.where}: {alone[0].str()}")
        if remaining or self._errors:
            raise BatchError(
                f"dead-letter topic {self.topic}: {remaining + len(self._errors)} records undelivered; "
                f"{'; '.join(self._errors[:3])}"
            )
        return refused
