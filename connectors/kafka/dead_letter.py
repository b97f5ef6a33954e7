"""Kafka Connect's dead-letter queue for sinks: the failed record as it was, plus error headers.

Header names are Kafka Connect's (DeadLetterQueueReporter), so existing DLQ tooling reads them.
"""

from __future__ import annotations

import traceback

from connectors.config.common import ErrorHandlingKeys, KafkaTopicsKeys
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import client_logger
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


class DeadLetterQueue:
    """Created inside a Spark task (Kafka clients cannot be pickled); flush() before reporting success."""

    def __init__(self, topic: str, client_config: dict[str, str], connector_name: str, context_headers: bool):
        from confluent_kafka import Producer

        self.topic = topic
        self.connector_name = connector_name
        self.context_headers = context_headers
        self._errors: list[str] = []
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
        where = record.where
        try:
            self._producer.produce(
                self.topic, key=record.key, value=record.value, headers=headers, timestamp=record.timestamp_ms or 0,
                on_delivery=lambda err, _msg: err is None or self._errors.append(f"{where}: {err.str()}"),
            )
        except Exception as exc:  # too large for the producer, say: name the record, not just the error
            self._errors.append(f"{where}: {exc}")
        self._producer.poll(0)

    def flush(self, timeout_s: float = 60) -> None:
        remaining = self._producer.flush(timeout_s)
        if remaining or self._errors:
            raise RuntimeError(
                f"dead-letter topic {self.topic}: {remaining + len(self._errors)} records undelivered; "
                f"{'; '.join(self._errors[:3])}"
            )
