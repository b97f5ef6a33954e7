"""Where the transforms run, as a Kafka Connect worker runs them: in a sink between the converters and the record the
connector maps to a message (SinkConversion); in a source between the record the connector made and the converters
that write Kafka's bytes (source_record)."""

from __future__ import annotations

from typing import Callable

from connectors.errors import RecordError
from connectors.kafka_connect.errors import ConversionError
from connectors.transforms.record import ConnectRecord, Header, KafkaHeaders, kafka_headers


class SinkConversion:
    def __init__(self, config):
        """`config`: a sink's config with ConverterKeys (and TransformKeys, when it runs transforms)."""
        self.key_converter = config.key_converter_instance()
        self.value_converter = config.value_converter_instance()
        chain = getattr(config, "transforms", None)
        self.transforms = chain.running() if chain else None

    def convert(self, record) -> tuple[ConnectRecord, KafkaHeaders] | None:
        """The Connect record of a Kafka record (connectors.kafka.record.KafkaRecord) and its headers as Kafka
        carries them; None when a transform dropped it. A converter's error is a RecordError; a transform's a
        TransformFailed."""
        try:
            key_schema, key = self.key_converter.to_connect(record.key)
            value_schema, value = self.value_converter.to_connect(record.value)
        except ConversionError as exc:
            raise RecordError(str(exc)) from exc
        timestamp = record.timestamp_ms if record.timestamp_type >= 0 else None
        if self.transforms is None:
            return (ConnectRecord(record.topic, record.partition, key_schema, key, value_schema, value, timestamp,
                                  offset=record.offset), record.headers)
        # Its headers as they came: bytes, no schema.
        connect = self.transforms.apply(ConnectRecord(
            record.topic, record.partition, key_schema, key, value_schema, value, timestamp,
            tuple(Header(k, None, v) for k, v in record.headers), record.offset))
        if connect is None:
            return None
        return connect, kafka_headers(connect)


def source_record(transforms, record: ConnectRecord, headers: KafkaHeaders,
                  header: Callable[[str, bytes], Header]) -> tuple[ConnectRecord, KafkaHeaders] | None:
    """A source's record and its headers after `transforms` (a RunningChain, or None), each header read for them by
    `header`; None when a transform dropped it (one that fails raises TransformFailed)."""
    if transforms is None:
        return record, headers
    connect = transforms.apply(record.replace(headers=tuple(header(k, v) for k, v in headers)))
    return None if connect is None else (connect, kafka_headers(connect))
