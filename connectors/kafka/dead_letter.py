"""Kafka Connect's dead-letter queue for sinks: the failed record as it was, plus error headers.

Header names are Kafka Connect's (DeadLetterQueueReporter), so existing DLQ tooling reads them.
"""

from __future__ import annotations

import traceback

from connectors.kafka.record import KafkaRecord

HEADER_PREFIX = "__connect.errors."


class DeadLetterQueue:
    """Created inside a Spark task (Kafka clients cannot be pickled); flush() before reporting success."""

    def __init__(self, topic: str, client_config: dict[str, str], connector_name: str, context_headers: bool):
        from confluent_kafka import Producer

        self.topic = topic
        self.connector_name = connector_name
        self.context_headers = context_headers
        self._errors: list[str] = []
        self._producer = Producer({**client_config, "enable.idempotence": True, "acks": "all", "log_level": 3})

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
        self._producer.produce(
            self.topic, key=record.key, value=record.value, headers=headers,
            timestamp=record.timestamp_ms or 0, on_delivery=self._on_delivery,
        )
        self._producer.poll(0)

    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self._errors.append(str(err))

    def flush(self, timeout_s: float = 60) -> None:
        remaining = self._producer.flush(timeout_s)
        if remaining or self._errors:
            raise RuntimeError(
                f"dead-letter topic {self.topic}: {remaining} records undelivered; errors: {self._errors[:3]}"
            )
