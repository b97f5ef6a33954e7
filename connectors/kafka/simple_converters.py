"""Which of a bridge's converters a columnar path can skip: String and ByteArray give back a record's own
bytes (a String only has to be valid UTF-8), so the sinks convert those straight from Arrow columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

import pyarrow as pa

from connectors.errors import RecordError
from connectors.kafka.record import KafkaRecord, records_from_arrow
from connectors.kafka_connect.converters import ByteArrayConverter, Converter, StringConverter
from connectors.kafka_connect.errors import ConversionError


@dataclass(frozen=True)
class SimpleConverters:
    columnar: bool  # both key and value converters are String or ByteArray
    key_is_string: bool
    value_is_string: bool

    @classmethod
    def of(cls, key_converter: Converter, value_converter: Converter) -> SimpleConverters:
        simple = (StringConverter, ByteArrayConverter)
        return cls(isinstance(key_converter, simple) and isinstance(value_converter, simple),
                   isinstance(key_converter, StringConverter), isinstance(value_converter, StringConverter))


def string_error(data: bytes) -> RecordError:
    """StringConverter's own error for bytes that are not UTF-8."""
    try:
        StringConverter().to_connect(data)
    except ConversionError as exc:
        return RecordError(str(exc))
    raise AssertionError("the bytes are valid UTF-8")


T = TypeVar("T")


def convert_each_record(batch: pa.RecordBatch, convert: Callable[[KafkaRecord], T]) -> Iterator[tuple[int, T | RecordError]]:
    """The record-by-record path, for converters a columnar path cannot skip: (row, outcome or bad record)."""
    for row, record in enumerate(records_from_arrow(batch)):
        try:
            yield row, convert(record)
        except RecordError as exc:
            yield row, exc
