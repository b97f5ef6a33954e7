"""The record a transform sees: Kafka Connect's ConnectRecord, after a sink's converters or before a source's."""

from __future__ import annotations

from typing import Any, NamedTuple

from connectors.kafka_connect.data import Schema
from connectors.kafka_connect.java_text import java_string


class TransformError(ValueError):
    """A transform cannot handle this record (Kafka Connect's DataException): it goes through errors.tolerance."""


class Header(NamedTuple):
    key: str
    schema: Schema | None  # None: schemaless (a header read from Kafka is its bytes, schema None)
    value: Any


class ConnectRecord(NamedTuple):
    """Immutable; a transform returns a changed copy (`replace`). A NamedTuple, not a dataclass: a chain copies each
    record once per transform, and dataclasses.replace costs several times what NamedTuple._replace does."""

    topic: str
    partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None  # milliseconds since the epoch
    headers: tuple[Header, ...] = ()
    offset: int | None = None  # a sink record's Kafka offset (InsertField's offset.field); None in a source

    def replace(self, **changes: Any) -> ConnectRecord:
        return self._replace(**changes)


KafkaHeaders = list[tuple[str, bytes | None]]


def kafka_headers(record: ConnectRecord) -> KafkaHeaders:
    """A record's headers as Kafka carries them."""
    return [(h.key, header_bytes(h)) for h in record.headers]


def header_bytes(header: Header) -> bytes | None:
    """A header's value as the bytes Kafka carries: a header read from Kafka as it was, a typed one (a transform's)
    as its text, as Connect's SimpleHeaderConverter writes it."""
    if header.value is None or isinstance(header.value, (bytes, bytearray)):
        return header.value
    return java_string(header.value, header.schema).encode("utf-8")
