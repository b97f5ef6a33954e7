"""Java's toString() for the values Kafka Connect hands a connector.

The reference connector turns keys, struct fields and map entries into attribute strings with
Java's toString(); producing the same text keeps attributes identical for existing subscribers.
Written by hand because no Python library mimics Java's formatting.
"""

from __future__ import annotations

import datetime as dt
import math
import struct as _struct
from decimal import Decimal
from typing import Any

from connectors.kafka_connect.bytes_text import bytes_to_text
from connectors.kafka_connect.data import Schema, Struct


def java_double_to_string(value: float) -> str:
    """Double.toString: shortest digits, plain notation in [1e-3, 1e7), else d.dddE±n."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        return repr(value)  # Python's repr is plain notation with shortest digits in this range
    exponent = f"{value:.17e}".split("e")[1]
    # Shortest round-tripping digits, as repr finds them, placed in Java's d.dddE±n form.
    digits = repr(magnitude).replace(".", "").lstrip("0").split("e")[0].rstrip("0") or "0"
    exp = int(exponent)
    sign = "-" if value < 0 else ""
    head, tail = digits[0], digits[1:] or "0"
    return f"{sign}{head}.{tail}E{exp}"


def java_float_to_string(value: float) -> str:
    """Float.toString for a FLOAT32: shortest digits that round-trip through a 32-bit float."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return java_double_to_string(value)
    as_float32 = _struct.unpack(">f", _struct.pack(">f", value))[0]
    for precision in range(1, 10):
        candidate = float(f"{as_float32:.{precision}g}")
        if _struct.unpack(">f", _struct.pack(">f", candidate))[0] == as_float32:
            return java_double_to_string(candidate)
    return java_double_to_string(as_float32)


def java_string(value: Any, schema: Schema | None = None) -> str:
    """The text Java's toString() gives for a Connect value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if schema is not None and schema.type == "FLOAT32":
            return java_float_to_string(value)
        return java_double_to_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        return str(value)  # Python's Decimal and Java's BigDecimal share the to-scientific-string rules
    if isinstance(value, (dt.date, dt.time)):
        return java_date_string(value)
    if isinstance(value, (bytes, bytearray)):
        # Java prints a byte[] as an object id; the caller picks a real encoding for bytes instead.
        raise TypeError("bytes have no faithful Java string form; encode them explicitly")
    if isinstance(value, Struct):
        parts = []
        for f in value.schema.fields:
            v = value.get(f.name)
            if v is not None:
                parts.append(f"{f.name}={_nested(v, f.schema)}")
        return "Struct{" + ",".join(parts) + "}"
    if isinstance(value, dict):
        key_schema = schema.key_schema if schema else None
        value_schema = schema.value_schema if schema else None
        return "{" + ", ".join(
            f"{_nested(k, key_schema)}={_nested(v, value_schema)}" for k, v in value.items()
        ) + "}"
    if isinstance(value, (list, tuple)):
        element_schema = schema.value_schema if schema else None
        return "[" + ", ".join(_nested(v, element_schema) for v in value) + "]"
    return str(value)


def java_date_string(value: dt.date | dt.time | dt.datetime) -> str:
    """java.util.Date.toString() on a JVM in UTC, which is how Connect hands Date, Time and Timestamp values."""
    if isinstance(value, dt.time):
        value = dt.datetime.combine(dt.date(1970, 1, 1), value)
    elif not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    return value.strftime("%a %b %d %H:%M:%S UTC %Y")  # C locale names, as Java's default English ones


def _nested(value: Any, schema: Schema | None) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes_to_text(bytes(value))[0]
    return java_string(value, schema)
