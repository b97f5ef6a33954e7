"""A Kafka record as a sink task sees it, before any converter runs."""

from __future__ import annotations

from dataclasses import dataclass, field

CREATE_TIME, LOG_APPEND_TIME = 0, 1


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    timestamp_type: int = CREATE_TIME  # -1: no timestamp
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"topic {self.topic} partition {self.partition} offset {self.offset}"
