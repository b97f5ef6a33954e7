"""Connect's logical types (Decimal, Date, Time, Timestamp) through JsonConverter and the sinks' text rules."""

import base64
import datetime as dt
import json
from decimal import Decimal

from connectors.kafka_connect.converters import JsonConverter
from connectors.kafka_connect.data import DATE, TIME, TIMESTAMP, decimal_schema, from_physical, to_physical
from connectors.kafka_connect.java_text import java_string


def _envelope(fields: list[dict], payload: dict) -> bytes:
    return json.dumps({"schema": {"type": "struct", "fields": fields}, "payload": payload}).encode()


def test_json_converter_gives_logical_values_and_writes_them_back_the_same():
    fields = [
        {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2"}},
        {"field": "day", "type": "int32", "name": DATE},
        {"field": "at", "type": "int32", "name": TIME},
        {"field": "ts", "type": "int64", "name": TIMESTAMP},
    ]
    payload = {"price": base64.b64encode((-1234).to_bytes(2, "big", signed=True)).decode(),
               "day": 20781, "at": 47107123, "ts": 1795482123456}
    raw = _envelope(fields, payload)
    schema, value = JsonConverter().to_connect(raw)
    assert value.get("price") == Decimal("-12.34")
    assert value.get("day") == dt.date(2026, 11, 24)
    assert value.get("at") == dt.time(13, 5, 7, 123000)
    assert value.get("ts") == dt.datetime(2026, 11, 24, 1, 2, 3, 456000, tzinfo=dt.timezone.utc)
    written = json.loads(JsonConverter().from_connect(schema, value))
    assert written["payload"] == payload
    assert JsonConverter().to_connect(json.dumps(written).encode()) == (schema, value)


def test_java_text_of_logical_values_is_what_a_utc_jvm_prints():
    assert java_string(Decimal("-12.34")) == "-12.34"
    assert java_string(Decimal("0.0000001")) == "1E-7"  # BigDecimal.toString switches to exponent form too
    assert java_string(dt.date(2026, 11, 24)) == "Tue Nov 24 00:00:00 UTC 2026"
    assert java_string(dt.time(13, 5, 7)) == "Thu Jan 01 13:05:07 UTC 1970"


def test_decimal_physical_form_is_the_unscaled_twos_complement():
    schema = decimal_schema(3)
    for text in ("0", "-0.001", "123456789.123", "-128.000", "127.999"):
        raw = to_physical(schema, Decimal(text))
        assert from_physical(schema, raw) == Decimal(text)
        assert int.from_bytes(raw, "big", signed=True) == int(Decimal(text).scaleb(3))
