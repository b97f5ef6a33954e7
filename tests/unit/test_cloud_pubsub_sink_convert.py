"""The sink's conversion rules, one by one (semantics doc: Cloud Pub/Sub sink)."""

import json
import struct

import pytest

from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import CloudPubSubSinkConverter
from connectors.errors import RecordError
from connectors.kafka.record import KafkaRecord

STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"


def converter(**keys):
    base = {"topics": "t", "cps.project": "p", "cps.topic": "c"}
    return CloudPubSubSinkConverter(CloudPubSubSinkConfig.model_validate({**base, **keys}))


def record(key=None, value=None, headers=(), **kw):
    return KafkaRecord(topic="t", partition=kw.get("partition", 2), offset=kw.get("offset", 41), key=key,
                       value=value, timestamp_ms=kw.get("timestamp_ms", 1700000000000), headers=list(headers))


def envelope(schema, payload):
    return json.dumps({"schema": schema, "payload": payload}).encode()


@pytest.mark.parametrize("schema_type, payload, data", [
    ("int8", -2, struct.pack(">b", -2)),
    ("int16", 300, struct.pack(">h", 300)),
    ("int32", -70000, struct.pack(">i", -70000)),
    ("int64", 2**40, struct.pack(">q", 2**40)),
    ("float", 1.5, struct.pack(">f", 1.5)),
    ("double", -2.25, struct.pack(">d", -2.25)),
    ("boolean", True, b"\x01"),
    ("boolean", False, b"\x00"),
    ("string", "héllo", "héllo".encode()),
    ("bytes", "AAEC", b"\x00\x01\x02"),
])
def test_primitive_values_are_encoded_by_schema_type(schema_type, payload, data):
    message = converter(**{"value.converter": JSON}).convert(record(value=envelope({"type": schema_type}, payload)))
    assert message.data == data and message.attributes == {}


def test_array_elements_are_concatenated():
    schema = {"type": "array", "items": {"type": "int16"}}
    message = converter(**{"value.converter": JSON}).convert(record(value=envelope(schema, [1, 2])))
    assert message.data == b"\x00\x01\x00\x02"


def test_struct_fields_become_attributes_and_the_body_field_the_data():
    schema = {"type": "struct", "fields": [
        {"field": "cps_message_body", "type": "string"}, {"field": "n", "type": "int32"},
        {"field": "ok", "type": "boolean"}, {"field": "gone", "type": "string", "optional": True}]}
    value = envelope(schema, {"cps_message_body": "body", "n": 7, "ok": False, "gone": None})
    message = converter(**{"value.converter": JSON}).convert(record(value=value))
    assert message.data == b"body" and message.attributes == {"n": "7", "ok": "false"}


@pytest.mark.parametrize("field, payload, problem", [
    ({"field": "m", "type": "map", "keys": {"type": "string"}, "values": {"type": "string"}}, {"m": {}}, "is a MAP"),
    ({"field": "r", "type": "string", "optional": False}, {"r": None}, "required struct field 'r' is null"),
])
def test_struct_errors(field, payload, problem):
    value = envelope({"type": "struct", "fields": [field]}, payload)
    with pytest.raises(RecordError, match=problem):
        converter(**{"value.converter": JSON}).convert(record(value=value))


def test_map_entries_become_attributes_and_the_body_key_the_data():
    schema = {"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}}
    value = envelope(schema, {"body": "hello", "a": "1"})
    message = converter(**{"value.converter": JSON, "messageBodyName": "body"}).convert(record(value=value))
    assert message.data == b"hello" and message.attributes == {"a": "1"}


def test_key_metadata_and_ordering_key():
    conv = converter(**{"key.converter": STRING, "metadata.publish": "true", "orderingKeySource": "key"})
    message = conv.convert(record(key=b"user-1", value=b"v"))
    assert message.attributes == {"key": "user-1", "kafka.topic": "t", "kafka.partition": "2",
                                  "kafka.offset": "41", "kafka.timestamp": "1700000000000"}
    assert message.ordering_key == "user-1"
    assert converter(orderingKeySource="partition").convert(record(value=b"v")).ordering_key == "2"
    # An empty key is still a key attribute, but never an ordering key.
    empty = conv.convert(record(key=b"", value=b"v"))
    assert empty.attributes["key"] == "" and empty.ordering_key == ""


def test_bytes_keys_are_text_when_utf8_else_marked_base64():
    assert converter().convert(record(key=b"abc", value=b"v")).attributes == {"key": "abc"}
    message = converter().convert(record(key=b"\xff\x00", value=b"v"))
    assert message.attributes == {"key": "/wA=", "key.encoding": "base64"}


def test_null_key_null_value_and_both_null():
    assert converter().convert(record(key=None, value=b"v")).attributes == {}
    assert converter().convert(record(key=b"k", value=None)).data == b""
    assert converter().convert(record(key=None, value=None)) is None  # nothing to publish: skipped


def test_header_limits_are_exact():
    headers = [("k" * 256, b"fits"), ("k" * 257, b"key too long"), ("v1024", b"x" * 1024), ("v1025", b"x" * 1025)]
    message = converter(**{"headers.publish": "true"}).convert(record(value=b"v", headers=headers))
    assert set(message.attributes) == {"k" * 256, "v1024"}
    assert message.headers_dropped == 2


def test_never_more_than_100_attributes():
    headers = [(f"h{i}", b"x") for i in range(150)]
    conv = converter(**{"headers.publish": "true", "metadata.publish": "true", "key.converter": STRING})
    message = conv.convert(record(key=b"k", value=b"v", headers=headers))
    assert len(message.attributes) == 100
    assert message.headers_dropped == 150 - (100 - 5)  # key and four metadata attributes came first
    assert message.attributes["key"] == "k" and message.attributes["kafka.offset"] == "41"
    exactly = converter(**{"headers.publish": "true"}).convert(
        record(value=b"v", headers=[(f"h{i}", b"x") for i in range(100)]))
    assert len(exactly.attributes) == 100 and exactly.headers_dropped == 0


def test_too_many_struct_attributes_is_a_record_error():
    fields = [{"field": f"f{i}", "type": "int32"} for i in range(101)]
    value = envelope({"type": "struct", "fields": fields}, {f"f{i}": i for i in range(101)})
    with pytest.raises(RecordError, match="101 attributes"):
        converter(**{"value.converter": JSON}).convert(record(value=value))


def test_bad_json_is_a_record_error():
    with pytest.raises(RecordError, match="not valid JSON"):
        converter(**{"value.converter": JSON}).convert(record(value=b"{nope"))
    with pytest.raises(RecordError, match='requires "schema" and "payload"'):
        converter(**{"value.converter": JSON}).convert(record(value=b'{"a": 1}'))


def test_schemaless_values_use_their_string_form():
    conv = converter(**{"value.converter": JSON, "value.converter.schemas.enable": "false"})
    assert conv.convert(record(value=b'{"a": 1, "b": [true, 2.5]}')).data == b"{a=1, b=[true, 2.5]}"
    assert conv.convert(record(value=b"1e10")).data == b"1.0E10"


def test_attribute_limits_are_bytes_not_characters_at_the_short_text_boundary():
    """put_text skips the byte count for texts short enough that no characters can pass the limits."""
    wide = "\U0001F600"  # 4 UTF-8 bytes
    schema = {"type": "struct", "fields": [{"field": "f", "type": "string"}]}
    fits = converter(**{"value.converter": JSON}).convert(record(value=envelope(schema, {"f": wide * 256})))
    assert fits.attributes["f"] == wide * 256  # 1,024 bytes
    with pytest.raises(RecordError, match="value is over 1024 bytes"):
        converter(**{"value.converter": JSON}).convert(record(value=envelope(schema, {"f": wide * 257})))
    key_schema = {"type": "struct", "fields": [{"field": wide * 65, "type": "string"}]}
    with pytest.raises(RecordError, match="is over 256 bytes"):
        converter(**{"value.converter": JSON}).convert(record(value=envelope(key_schema, {wide * 65: "v"})))
    ok_key = {"type": "struct", "fields": [{"field": wide * 64, "type": "string"}]}
    assert converter(**{"value.converter": JSON}).convert(record(value=envelope(ok_key, {wide * 64: "v"}))).attributes
    with pytest.raises(RecordError, match="reserved prefix 'goog'"):
        converter(**{"value.converter": JSON}).convert(record(value=envelope(
            {"type": "struct", "fields": [{"field": "googx", "type": "string"}]}, {"googx": "v"})))
