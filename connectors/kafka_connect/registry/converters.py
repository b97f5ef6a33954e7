"""Confluent's AvroConverter, ProtobufConverter and JsonSchemaConverter: registry bytes <-> Connect data.

Each converter fetches a schema once per schema id (and registers or looks up one per Connect schema and
topic) and keeps it for the life of the converter, which is one Spark task: never a request per record.
"""

from __future__ import annotations

from typing import Any

from connectors.kafka_connect.converter_classes import AVRO_CONVERTER, JSON_SCHEMA_CONVERTER, PROTOBUF_CONVERTER
from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.data import Schema
from connectors.kafka_connect.registry import avro_data, json_schema_data, protobuf_data
from connectors.kafka_connect.registry.client import call_registry, registry_client
from connectors.kafka_connect.registry.settings import RegistrySettings
from connectors.kafka_connect.registry.wire import (
    header, message_indexes, split_header, split_message_indexes, subject_name,
)


class _RegistryConverter:
    schema_type = ""

    def __init__(self, settings: RegistrySettings):
        self.settings = settings
        self._readers: dict[int, Any] = {}
        # A schema id the registry could not give (unknown, or the registry down): every later record of that
        # id in this task fails at once with the same error, instead of waiting out the registry again.
        self._unreadable: dict[int, ConversionError] = {}
        self._writers: dict[tuple[Schema | None, str], tuple[int, Any]] = {}

    @property
    def client(self):
        return registry_client(self.settings)

    # --- bytes -> Connect --------------------------------------------------------------------------
    def to_connect(self, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        schema_id, payload = split_header(data)
        try:
            return self._decode(self._reader(schema_id), payload)
        except ConversionError as exc:
            raise ConversionError(f"schema id {schema_id}: {exc}") from None

    def _reader(self, schema_id: int) -> Any:
        reader = self._readers.get(schema_id)
        if reader is None:
            if schema_id in self._unreadable:
                raise self._unreadable[schema_id]
            try:
                registered = call_registry(self.settings, f"fetching schema id {schema_id}",
                                           lambda: self.client.get_schema(schema_id))
                if (registered.schema_type or "AVRO") != self.schema_type:
                    raise ConversionError(f"schema id {schema_id} is a {registered.schema_type} schema, "
                                          f"not {self.schema_type}")
                reader = self._readers[schema_id] = self._parse(registered)
            except ConversionError as exc:
                self._unreadable[schema_id] = exc
                raise
        return reader

    def _parse(self, registered) -> Any:
        raise NotImplementedError

    def _decode(self, reader: Any, payload: memoryview) -> tuple[Schema | None, Any]:
        raise NotImplementedError

    # --- Connect -> bytes --------------------------------------------------------------------------
    def from_connect(self, schema: Schema | None, value: Any, topic: str = "") -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise ConversionError(f"{type(self).__name__} needs a schema; the value has none")
        found = self._writers.get((schema, topic))
        if found is None:
            found = self._writers[(schema, topic)] = self._writer_for(schema, topic)
        schema_id, writer = found
        return header(schema_id) + self._encode(writer, value)

    def _writer_for(self, schema: Schema, topic: str) -> tuple[int, Any]:
        from confluent_kafka.schema_registry import Schema as RegistrySchema

        writer = self._writer(schema)
        subject = subject_name(self.settings, topic, writer.record_name)
        candidate = RegistrySchema(writer.text, self.schema_type)
        if self.settings.use_latest_version:
            latest = call_registry(self.settings, f"reading the latest schema of subject {subject}",
                                   lambda: self.client.get_latest_version(subject))
            # The bytes must be written in the schema the id names: a value that does not fit it fails.
            return latest.schema_id, self._registered_writer(latest.schema)
        if self.settings.auto_register_schemas:
            schema_id = call_registry(self.settings, f"registering a schema under subject {subject}",
                                      lambda: self.client.register_schema(
                                          subject, candidate, normalize_schemas=self.settings.normalize_schemas))
            return schema_id, writer
        found = call_registry(self.settings, f"looking up the schema under subject {subject} "
                              f"(auto.register.schemas=false)", lambda: self.client.lookup_schema(
                                  subject, candidate, normalize_schemas=self.settings.normalize_schemas))
        return found.schema_id, writer

    def _writer(self, schema: Schema) -> Any:
        raise NotImplementedError

    def _registered_writer(self, registered) -> Any:
        """A writer for a schema taken from the registry (use.latest.version)."""
        return self._parse(registered)

    def _encode(self, writer: Any, value: Any) -> bytes:
        raise NotImplementedError


class AvroConverter(_RegistryConverter):
    schema_type = "AVRO"

    def _parse(self, registered) -> avro_data.AvroSchema:
        return avro_data.parse(registered.schema_str)

    def _decode(self, reader: avro_data.AvroSchema, payload: memoryview) -> tuple[Schema | None, Any]:
        return reader.connect, avro_data.decode(reader, payload)

    def _writer(self, schema: Schema) -> avro_data.AvroSchema:
        return avro_data.from_connect_schema(schema, self.settings.connect_meta_data)

    def _encode(self, writer: avro_data.AvroSchema, value: Any) -> bytes:
        return avro_data.encode(writer, value)


class JsonSchemaConverter(_RegistryConverter):
    schema_type = "JSON"

    def _parse(self, registered) -> json_schema_data.JsonSchema:
        return json_schema_data.parse(registered.schema_str)

    def _decode(self, reader: json_schema_data.JsonSchema, payload: memoryview) -> tuple[Schema | None, Any]:
        return reader.connect, json_schema_data.decode(reader, payload)

    def _writer(self, schema: Schema) -> json_schema_data.JsonSchema:
        return json_schema_data.from_connect_schema(schema)

    def _encode(self, writer: json_schema_data.JsonSchema, value: Any) -> bytes:
        return json_schema_data.encode(writer, value)


class ProtobufConverter(_RegistryConverter):
    schema_type = "PROTOBUF"

    def __init__(self, settings: RegistrySettings):
        super().__init__(settings)
        self._messages: dict[int, dict] = {}

    def to_connect(self, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        schema_id, payload = split_header(data)
        try:
            indexes, message = split_message_indexes(payload)
            reader = self._reader(schema_id)
            return protobuf_data.decode(reader, indexes, message, self._messages.setdefault(schema_id, {}))
        except ConversionError as exc:
            raise ConversionError(f"schema id {schema_id}: {exc}") from None

    def _parse(self, registered) -> protobuf_data.ProtobufSchema:
        references = self._references(registered, seen=set())
        return protobuf_data.parse(registered.schema_str, "default.proto", references)

    def _references(self, registered, seen: set) -> list[tuple[str, str]]:
        """(import name, text) of every file the schema imports through the registry, dependencies first."""
        out: list[tuple[str, str]] = []
        for ref in registered.references or []:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            version = call_registry(self.settings, f"fetching reference {ref.name} ({ref.subject} v{ref.version})",
                                    lambda ref=ref: self.client.get_version(ref.subject, ref.version))
            out += self._references(version.schema, seen)
            out.append((ref.name, version.schema.schema_str))
        return out

    def _writer(self, schema: Schema) -> protobuf_data.ProtobufWriter:
        return protobuf_data.from_connect_schema(schema)

    def _registered_writer(self, registered) -> protobuf_data.ProtobufWriter:
        return protobuf_data.writer_for(self._parse(registered))

    def _encode(self, writer: protobuf_data.ProtobufWriter, value: Any) -> bytes:
        return message_indexes([0]) + protobuf_data.encode(writer, value)


def registry_converter(class_name: str, settings: RegistrySettings) -> _RegistryConverter:
    return {AVRO_CONVERTER: AvroConverter, PROTOBUF_CONVERTER: ProtobufConverter,
            JSON_SCHEMA_CONVERTER: JsonSchemaConverter}[class_name](settings)
