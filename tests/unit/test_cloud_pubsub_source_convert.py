"""The source's mapping rules and partition schemes (semantics doc: Cloud Pub/Sub source)."""

import json

import pytest

from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter, MessageError, PubSubMessageIn
from connectors.cloud_pubsub_source.partitioning import Partitioner, java_bytes_hash, java_string_hash
from connectors.cloud_pubsub_source.write import ack_id_chunks

JSON = "org.apache.kafka.connect.json.JsonConverter"


def converter(**keys):
    base = {"cps.subscription": "s", "cps.project": "p", "kafka.topic": "t"}
    return CloudPubSubSourceConverter(CloudPubSubSourceConfig.model_validate({**base, **keys}))


def message(data=b"body", attributes=None, ordering_key="", publish_time_ms=1_700_000_000_123):
    return PubSubMessageIn(data, attributes or {}, ordering_key, publish_time_ms)


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
    ("\U0001F600", 1772899),  # a surrogate pair counts as two UTF-16 units, as in Java
])
def test_java_string_hash_code(text, expected):
    assert java_string_hash(text) == expected


def test_java_bytes_hash_code():
    assert java_bytes_hash(b"") == 1 and java_bytes_hash(b"abc") == 126145
    assert java_bytes_hash(b"\xff") == 31 - 1  # bytes are signed in Java


def test_hash_key_placement_never_negative_even_for_min_value():
    partitioner = Partitioner("hash_key", 3)
    assert partitioner.partition("polygenelubricants", b"", "") == 2147483648 % 3
    assert partitioner.partition("hello", b"", "") == 99162322 % 3
    assert partitioner.partition(None, b"", "") == 0


def test_round_robin_and_ordering_key_schemes():
    rr = Partitioner("round_robin", 3)
    assert [rr.partition(None, b"", "") for _ in range(5)] == [0, 1, 2, 0, 1]
    ok = Partitioner("ordering_key", 4)
    assert ok.partition(None, b"", "Aa") == ok.partition(None, b"", "BB") == 2112 % 4
    assert [ok.partition(None, b"", "") for _ in range(2)] == [0, 1]  # empty key: round robin
    assert Partitioner("hash_value", 5).partition(None, b"abc", "") == 126145 % 5
    assert Partitioner("kafka_partitioner", 5).partition("k", b"", "") is None


def test_message_without_other_attributes_is_bytes_with_key_and_timestamp():
    conv = converter(**{"kafka.key.attribute": "user", "kafka.timestamp.attribute": "ts"})
    record = conv.convert(message(attributes={"user": "u1", "ts": "1600000000000"}))
    assert (record.key, record.value, record.timestamp_ms) == (b"u1", b"body", 1600000000000)
    # No key attribute: null key; unparseable timestamp: the publish time.
    record = conv.convert(message(attributes={"ts": "yesterday"}))
    assert record.key is None and record.timestamp_ms == 1_700_000_000_123


def test_other_attributes_make_a_struct_with_message_first_then_sorted_fields():
    conv = converter(**{"value.converter": JSON, "kafka.key.attribute": "k", "cps.makeOrderingKeyAttribute": True})
    record = conv.convert(message(data=b"\x00\x01", attributes={"zeta": "z", "k": "key", "alpha": "a"},
                                  ordering_key="ok"))
    doc = json.loads(record.value)
    assert [f["field"] for f in doc["schema"]["fields"]] == ["message", "alpha", "zeta", "orderingKey"]
    assert doc["schema"]["fields"][0]["type"] == "bytes"
    assert doc["payload"] == {"message": "AAE=", "alpha": "a", "zeta": "z", "orderingKey": "ok"}
    schemaless = converter(**{"value.converter": JSON, "value.converter.schemas.enable": False})
    assert json.loads(schemaless.convert(message(attributes={"a": "1"})).value) == {"message": "Ym9keQ==", "a": "1"}


def test_ordering_key_as_key_and_headers_mode():
    conv = converter(**{"kafka.key.attribute": "orderingKey", "kafka.record.headers": True,
                        "cps.makeOrderingKeyAttribute": True})
    record = conv.convert(message(attributes={"b": "2", "a": "1"}, ordering_key="ok"))
    assert record.key == b"ok" and record.value == b"body"
    assert record.headers == [("a", b"1"), ("b", b"2"), ("orderingKey", b"ok")]


def test_a_struct_with_the_byte_array_converter_is_a_clear_error():
    with pytest.raises(MessageError, match="use JsonConverter, or kafka.record.headers=true"):
        converter().convert(message(attributes={"a": "1"}))


def test_ack_requests_stay_under_the_size_limit():
    ack_ids = ["x" * 196] * 10_000  # ~2 MB of ids
    chunks = list(ack_id_chunks(ack_ids))
    assert sum(len(c) for c in chunks) == 10_000 and len(chunks) == 4
    assert all(sum(len(a) + 4 for a in c) <= 500_000 for c in chunks)


def _raw(data=b"body", attributes=None, ordering_key="", publish_time_ms=1_700_000_000_123):
    """A raw protobuf PubsubMessage, as a pull's response carries it."""
    from google.protobuf.timestamp_pb2 import Timestamp
    from google.pubsub_v1.types import PubsubMessage

    raw = PubsubMessage.pb(PubsubMessage(data=data, attributes=attributes or {}, ordering_key=ordering_key))
    raw.publish_time.CopyFrom(Timestamp(seconds=publish_time_ms // 1000, nanos=publish_time_ms % 1000 * 1_000_000))
    return raw


@pytest.mark.parametrize("keys", [
    {}, {"kafka.key.attribute": "k"}, {"kafka.key.attribute": "orderingKey"}, {"kafka.timestamp.attribute": "ts"},
    {"kafka.record.headers": "true"}, {"cps.makeOrderingKeyAttribute": "true"},
    {"kafka.partition.scheme": "hash_value", "kafka.partition.count": "3"},
    {"kafka.partition.scheme": "ordering_key", "kafka.partition.count": "3"},
    {"kafka.partition.scheme": "kafka_partitioner"},
    {"value.converter": JSON, "key.converter": JSON},
    {"value.converter": "org.apache.kafka.connect.storage.StringConverter"},
])
def test_a_plain_message_has_the_record_convert_makes(keys):
    from connectors.cloud_pubsub_source.write import pb_message_in

    plain, general = converter(**keys), converter(**keys)
    for data in (b"body", b"", b"\xff\x00 bytes"):
        raw = _raw(data)
        assert plain.plain_record(raw) == general.convert(pb_message_in(raw))


def test_a_message_with_attributes_or_an_ordering_key_or_under_transforms_is_not_plain():
    assert converter().plain_record(_raw(attributes={"a": "1"})) is None
    assert converter().plain_record(_raw(ordering_key="o")) is None
    filtered = converter(**{"transforms": "f", "transforms.f.type": "org.apache.kafka.connect.transforms.Filter"})
    assert filtered.plain_record(_raw()) is None
