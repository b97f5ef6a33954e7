"""A Kafka record as a sink task sees it, before any converter runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa


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


def records_from_arrow(batch: pa.RecordBatch) -> Iterator[KafkaRecord]:
    """Records from a batch of Kafka rows (range_reader.RECORD_SCHEMA) (timestamp as `timestamp_ms`); without a headers
    column (a connector that does not read them), records have none."""
    columns = batch.to_pydict()
    headers = columns.get("headers") or [None] * batch.num_rows
    for i in range(batch.num_rows):
        yield KafkaRecord(
            topic=columns["topic"][i], partition=columns["partition"][i], offset=columns["offset"][i],
            key=columns["key"][i], value=columns["value"][i],
            timestamp_ms=columns["timestamp_ms"][i], timestamp_type=columns["timestampType"][i],
            headers=[(h["key"], h["value"]) for h in (headers[i] or [])],
        )
