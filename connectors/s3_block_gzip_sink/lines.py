"""A record's value as one text line, through the bridge's value converter."""

from __future__ import annotations

import json

from connectors.errors import RecordRefused
from connectors.kafka_connect.converters import ByteArrayConverter, value_to_json
from connectors.kafka_connect.errors import ConversionError


class LineError(RecordRefused, ValueError):
    """A record that cannot become a line of the archive."""


def record_line(converter, value: bytes | None) -> bytes:
    """The line for a record (without the newline). A tombstone is an empty line, so every offset
    keeps its line; a value with a newline inside cannot be one line and is a bad record."""
    if value is None:
        return b""
    if isinstance(converter, ByteArrayConverter):
        line = value
    else:
        try:
            schema, connect_value = converter.to_connect(value)
        except ConversionError as exc:
            raise LineError(str(exc)) from exc
        if isinstance(connect_value, str):
            line = connect_value.encode("utf-8")
        else:
            line = json.dumps(value_to_json(schema, connect_value), separators=(",", ":")).encode("utf-8")
    if b"\n" in line:
        raise LineError("the value holds a newline; Block-GZIP stores one record per line")
    return line
