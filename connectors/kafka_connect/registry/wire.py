"""Confluent's wire format (magic byte 0, a 4-byte schema id, for Protobuf the message indexes) and subjects."""

from __future__ import annotations

import struct

from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.registry.settings import (
    RECORD_NAME_STRATEGY, TOPIC_NAME_STRATEGY, RegistrySettings,
)

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")


def split_header(data: bytes) -> tuple[int, memoryview]:
    """(schema id, the rest) of a record's bytes."""
    if len(data) < _HEADER.size or data[0] != MAGIC_BYTE:
        first = f"0x{data[0]:02x}" if data else "nothing"
        raise ConversionError(f"not in the Schema Registry wire format: the first byte is {first}, not the "
                              f"magic byte 0x00 (was the record written by a registry serializer?)")
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, memoryview(data)[_HEADER.size:]


def header(schema_id: int) -> bytes:
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ConversionError("Protobuf message indexes run past the end of the record")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zig-zag, as Confluent writes them
        shift += 7


def _write_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def split_message_indexes(payload: memoryview) -> tuple[list[int], memoryview]:
    """Protobuf's message indexes (a count, then the path to the message in its file) and the message."""
    count, pos = _read_varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]  # the common case, first message of the file, is one zero byte
    if count < 0 or count > 100:
        raise ConversionError(f"Protobuf message index count {count} is not plausible")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(payload, pos)
        indexes.append(index)
    return indexes, payload[pos:]


def message_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return _write_varint(len(indexes)) + b"".join(_write_varint(i) for i in indexes)


def subject_name(settings: RegistrySettings, topic: str, record_name: str | None) -> str:
    suffix = "key" if settings.is_key else "value"
    if settings.subject_name_strategy == TOPIC_NAME_STRATEGY:
        return f"{topic}-{suffix}"
    if not record_name:
        raise ConversionError(f"{settings.subject_name_strategy.rsplit('.', 1)[-1]} needs a named record "
                              f"schema; this {suffix} schema has no name")
    if settings.subject_name_strategy == RECORD_NAME_STRATEGY:
        return record_name
    return f"{topic}-{record_name}"
