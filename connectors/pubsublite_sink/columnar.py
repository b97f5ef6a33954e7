"""Kafka rows of one Arrow batch -> Pub/Sub Lite messages, reading columns instead of building records.

With String or ByteArray converters for key and value, encodeToBytes gives back the record's own
bytes (a String only has to be valid UTF-8), so a message is the key and value bytes plus the
attributes, made straight from the column lists. Every other converter goes through
PubSubLiteSinkConverter record by record. tests/unit/test_pubsublite_sink_columnar.py holds both
paths to the same output.
"""

from __future__ import annotations

from typing import Iterator, Union

import pyarrow as pa

from connectors.errors import RecordError
from connectors.kafka.simple_converters import SimpleConverters, convert_each_record, string_error
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.convert import (
    KAFKA_EVENT_TIME_TYPE_ATTRIBUTE, KAFKA_OFFSET_ATTRIBUTE, KAFKA_PARTITION_ATTRIBUTE, KAFKA_TOPIC_ATTRIBUTE,
    MAX_MESSAGE_BYTES, TIMESTAMP_TYPES, PubSubLiteSinkConverter, PubSubMessagePb,
)
from connectors.transforms.columnar import ColumnarChain

# (a raw PubSubMessage, its size in bytes), None for a record a transform dropped, or a bad record
Outcome = Union[tuple, None, RecordError]
_TIMESTAMP_TYPE_BYTES = {number: name.encode() for number, name in TIMESTAMP_TYPES.items()}


class LiteColumnarConverter:
    def __init__(self, config: PubSubLiteSinkConfig):
        self.record_converter = PubSubLiteSinkConverter(config)
        self.kinds = SimpleConverters.of(self.record_converter.key_converter, self.record_converter.value_converter)
        # Transforms run on Connect records, record by record, unless they never look inside a key or value.
        self.chain = ColumnarChain.of(config.transforms) if config.transforms and self.kinds.columnar else None
        self.columnar = self.kinds.columnar and (not config.transforms or self.chain is not None)

    def convert(self, batch: pa.RecordBatch) -> Iterator[tuple[int, Outcome]]:
        """(row, outcome) for every row of a batch of Kafka rows (range_reader.RECORD_SCHEMA), in order."""
        if not self.columnar:
            yield from convert_each_record(batch, self._message_and_size)
        elif self.chain is None:
            yield from self._convert_columns(batch)
        else:
            transformed = self.chain.apply(batch)
            yield from self._convert_columns(transformed.batch, transformed.dropped, transformed.failed)

    def _message_and_size(self, record) -> tuple | None:
        message = self.record_converter.convert(record)
        return None if message is None else (message, message.ByteSize())

    def _convert_columns(self, batch: pa.RecordBatch, dropped=None,
                         failed: dict | None = None) -> Iterator[tuple[int, Outcome]]:
        """`dropped`: rows a transform dropped (None for each); `failed`: rows a transform failed on, with its
        error."""
        columns = batch.to_pydict()
        keys, values, headers = columns["key"], columns["value"], columns["headers"]
        topics, partitions, offsets = columns["topic"], columns["partition"], columns["offset"]
        timestamps, timestamp_types = columns["timestamp_ms"], columns["timestampType"]
        key_is_string, value_is_string = self.kinds.key_is_string, self.kinds.value_is_string
        topic_bytes: dict[str, bytes] = {}
        for row in range(batch.num_rows):
            key, value = keys[row] or b"", values[row] or b""
            if key_is_string and not _is_utf8(key):
                yield row, string_error(key)
                continue
            if value_is_string and not _is_utf8(value):
                yield row, string_error(value)
                continue
            if dropped is not None and dropped[row]:  # transforms run after the converters, as in Kafka Connect
                yield row, None
                continue
            if failed and row in failed:
                yield row, failed[row]
                continue
            message = PubSubMessagePb(key=key, data=value)
            attributes = message.attributes
            for header in headers[row] or ():
                attributes[header["key"]].values.append(header["value"] or b"")
            topic = topics[row]
            encoded_topic = topic_bytes.get(topic) or topic_bytes.setdefault(topic, topic.encode())
            attributes[KAFKA_TOPIC_ATTRIBUTE].values.append(encoded_topic)
            attributes[KAFKA_PARTITION_ATTRIBUTE].values.append(str(partitions[row]).encode())
            attributes[KAFKA_OFFSET_ATTRIBUTE].values.append(str(offsets[row]).encode())
            timestamp_type = _TIMESTAMP_TYPE_BYTES.get(timestamp_types[row])
            if timestamps[row] is not None and timestamp_type is not None:
                attributes[KAFKA_EVENT_TIME_TYPE_ATTRIBUTE].values.append(timestamp_type)
                message.event_time.FromMilliseconds(timestamps[row])
            size = message.ByteSize()
            if size > MAX_MESSAGE_BYTES:
                yield row, RecordError(f"message is {size} bytes; Pub/Sub Lite allows {MAX_MESSAGE_BYTES}")
                continue
            yield row, (message, size)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
