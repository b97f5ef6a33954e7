"""Kafka rows of one Arrow batch -> Pub/Sub messages, reading columns instead of building records.

For the common converters (String and ByteArray, for key and value) the rules of
CloudPubSubSinkConverter reduce to a few byte operations per row, done here straight from the
column lists; every other converter (JSON, structs, maps) goes through CloudPubSubSinkConverter
record by record. tests/unit/test_cloud_pubsub_sink_columnar.py holds both paths to the same output.
"""

from __future__ import annotations

import base64
from typing import Iterator, Union

import pyarrow as pa
import pyarrow.compute as pc

from connectors.cloud_pubsub.wire import EncodedMessages, encode_messages
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import (
    KEY_ATTRIBUTE, MAX_ATTRIBUTE_VALUE_BYTES, MAX_MESSAGE_BYTES, MAX_ORDERING_KEY_BYTES, CloudPubSubSinkConverter,
    OutgoingMessage, _Attributes, _attribute_problem,
)
from connectors.errors import RecordError
from connectors.kafka.simple_converters import SimpleConverters, convert_each_record, string_error
from connectors.kafka_connect.bytes_text import BASE64
from connectors.transforms.columnar import ColumnarChain, Transformed

Outcome = Union[OutgoingMessage, None, RecordError]  # a message, a skipped record, or a bad record
_SHORT_ENOUGH = 256  # characters: at most 1,024 UTF-8 bytes, under every attribute limit
# Encoding a batch column-wise costs about 1.5 ms of Arrow and numpy calls whatever its size, converting row by row
# about 7 us a row (measured): below this many rows (an always-on round of a few records) row by row is cheaper.
ENCODE_FROM_ROWS = 256


class ColumnarConverter:
    def __init__(self, config: CloudPubSubSinkConfig, topic_schemas=None):
        self.config = config
        self.record_converter = CloudPubSubSinkConverter(config, topic_schemas)
        self.kinds = SimpleConverters.of(self.record_converter.key_converter, self.record_converter.value_converter)
        # Transforms run on Connect records, record by record, unless they never look inside a key or value.
        self.chain = ColumnarChain.of(config.transforms) if config.transforms and self.kinds.columnar else None
        self.columnar = self.kinds.columnar and (not config.transforms or self.chain is not None)
        # The seed's defaults and the like: each message is the value as data and the key as its one attribute,
        # so a whole batch can be encoded at once (encoded()).
        self._last: tuple[pa.RecordBatch, Transformed] | None = None  # the chain's last batch, in and out
        self.encodes_batches = (self.columnar and config.message_format == "attributes"
                                and not config.metadata_publish and not config.headers_publish
                                and config.ordering_key_source == "none")

    def encoded(self, batch: pa.RecordBatch) -> EncodedMessages | None:
        """The batch's messages encoded column-wise (wire.py), when every row converts to a message with the key
        as its only attribute; None when a row needs the rules row by row (a key or value that is not UTF-8, a
        key over the attribute limit, a message over Pub/Sub's, a record with nothing to publish) or when the batch
        is shorter than ENCODE_FROM_ROWS."""
        if not self.encodes_batches or batch.num_rows < ENCODE_FROM_ROWS:
            return None
        if self.chain is not None:
            transformed = self._transformed(batch)
            if transformed.dropped is not None or transformed.failed:
                return None
            batch = transformed.batch
        keys, values = batch.column("key"), batch.column("value")
        try:
            keys.cast(pa.string())  # every key is UTF-8 text (else base64 with key.encoding, or a bad record)
            if self.kinds.value_is_string:
                values.cast(pa.string())
        except pa.ArrowInvalid:
            return None
        key_bytes, value_bytes = pc.binary_length(keys), pc.binary_length(values)
        if (pc.max(key_bytes).as_py() or 0) > MAX_ATTRIBUTE_VALUE_BYTES:
            return None
        if (pc.max(value_bytes).as_py() or 0) > MAX_MESSAGE_BYTES:
            return None
        nothing_to_publish = pc.and_(pc.is_null(keys), pc.equal(pc.fill_null(value_bytes, 0), 0))
        if pc.any(nothing_to_publish).as_py():
            return None
        return encode_messages(values, KEY_ATTRIBUTE, keys)

    def convert(self, batch: pa.RecordBatch) -> Iterator[tuple[int, Outcome]]:
        """(row, outcome) for every row of a batch of Kafka rows (range_reader.RECORD_SCHEMA), in order."""
        if self.columnar and self.config.message_format == "attributes":
            if self.chain is None:
                yield from self._convert_columns(batch)
                return
            transformed = self._transformed(batch)
            original_topics = batch.column("topic").to_pylist() if transformed.topics_changed else None
            yield from self._convert_columns(transformed.batch, transformed.dropped, original_topics, transformed.failed)
        else:
            yield from convert_each_record(batch, self.record_converter.convert)

    def _transformed(self, batch: pa.RecordBatch) -> Transformed:
        """The chain's batch; the writer asks `encoded` then, when that declines, `convert` of the same batch, and the
        chain runs once for both."""
        if self._last is None or self._last[0] is not batch:
            self._last = (batch, self.chain.apply(batch))
        return self._last[1]

    def _convert_columns(self, batch: pa.RecordBatch, dropped=None, original_topics: list[str] | None = None,
                         failed: dict | None = None) -> Iterator[tuple[int, Outcome]]:
        """`dropped`: rows a transform dropped (skipped); `original_topics`: the rows' topics before a router renamed
        them (then a message names its new topic, for cps.topic's ${topic}); `failed`: rows a transform failed on,
        with its error."""
        cfg = self.config
        new_topics = batch.column("topic").to_pylist() if original_topics is not None else None
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        partitions = batch.column("partition").to_pylist()
        metadata = None
        if cfg.metadata_publish:
            metadata = (batch.column("topic").to_pylist(), batch.column("offset").to_pylist(),
                        batch.column("timestamp_ms").to_pylist(), batch.column("timestampType").to_pylist())
        headers = batch.column("headers").to_pylist() if cfg.headers_publish else None
        order_by_key = cfg.ordering_key_source == "key"
        order_by_partition = cfg.ordering_key_source == "partition"
        key_is_string, value_is_string = self.kinds.key_is_string, self.kinds.value_is_string

        for row in range(batch.num_rows):
            key, value = keys[row], values[row]
            attributes: dict[str, str] = {}
            key_text = ""
            if key is not None:
                try:
                    key_text = key.decode("utf-8")
                    key_encoding = None
                except UnicodeDecodeError:
                    if key_is_string:
                        yield row, string_error(key)
                        continue
                    key_text, key_encoding = base64.b64encode(key).decode("ascii"), BASE64
            if value is not None and value_is_string:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    yield row, string_error(value)
                    continue
            if dropped is not None and dropped[row]:  # transforms run after the converters, as in Kafka Connect
                yield row, None
                continue
            if failed and row in failed:
                yield row, failed[row]
                continue
            if key is not None:
                if len(key_text) > _SHORT_ENOUGH:
                    problem = _attribute_problem(KEY_ATTRIBUTE, key_text)
                    if problem:
                        yield row, RecordError(problem)
                        continue
                attributes[KEY_ATTRIBUTE] = key_text
                if key_encoding:
                    attributes["key.encoding"] = key_encoding
            if metadata is not None:
                topics, offsets, timestamps, timestamp_types = metadata
                attributes["kafka.topic"] = topics[row]
                attributes["kafka.partition"] = str(partitions[row])
                attributes["kafka.offset"] = str(offsets[row])
                if timestamps[row] is not None and timestamp_types[row] >= 0:
                    attributes["kafka.timestamp"] = str(timestamps[row])
            data = value or b""
            headers_dropped = 0
            if headers is not None and headers[row]:
                offer = _Attributes()
                offer.values = attributes
                for header in headers[row]:
                    headers_dropped += not offer.offer_header(header["key"], header["value"])
            if len(data) > MAX_MESSAGE_BYTES:
                yield row, RecordError(f"message data is {len(data)} bytes; Pub/Sub allows {MAX_MESSAGE_BYTES}")
                continue
            if not data and not attributes:
                yield row, None
                continue
            ordering_key = ""
            if order_by_key and key_text:
                ordering_key = key_text
                if len(ordering_key) > _SHORT_ENOUGH and len(ordering_key.encode("utf-8")) > MAX_ORDERING_KEY_BYTES:
                    yield row, RecordError(f"ordering key is over {MAX_ORDERING_KEY_BYTES} bytes")
                    continue
            elif order_by_partition:
                ordering_key = str(partitions[row])
            topic = None
            if new_topics is not None and new_topics[row] != original_topics[row]:
                topic = new_topics[row]
            yield row, OutgoingMessage(data, attributes, ordering_key, headers_dropped, topic)
