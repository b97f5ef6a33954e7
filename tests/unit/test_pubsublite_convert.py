"""The Lite connectors' mapping and encoding rules, one by one (semantics doc: Pub/Sub Lite)."""

import base64
import json

import pytest
from google.cloud.pubsublite_v1 import types
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from connectors.errors import RecordError
from connectors.kafka.record import KafkaRecord
from connectors.kafka_connect.data import Field, Schema, Struct
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.convert import PubSubLiteSinkConverter, encode_to_bytes
from connectors.pubsublite_sink.write import default_router, kafka_partition_router
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.pubsublite_source.convert import PubSubLiteSourceConverter

JSON = "org.apache.kafka.connect.json.JsonConverter"
LITE = {"pubsublite.project": "p", "pubsublite.location": "us-central1-a"}


def sink(**keys):
    return PubSubLiteSinkConverter(PubSubLiteSinkConfig.model_validate(
        {"topics": "t", "pubsublite.topic": "lt", **LITE, **keys}))


def record(key=None, value=None, headers=(), timestamp_ms=1700000000123, timestamp_type=0):
    return KafkaRecord(topic="orders", partition=2, offset=41, key=key, value=value, timestamp_ms=timestamp_ms,
                       timestamp_type=timestamp_type, headers=list(headers))


def as_value(data: bytes) -> dict:
    """A serialized google.protobuf.Value, parsed (map order in bytes is not part of the contract)."""
    return MessageToDict(struct_pb2.Value.FromString(data))


def envelope(schema, payload):
    return json.dumps({"schema": schema, "payload": payload}).encode()


@pytest.mark.parametrize("schema, value, expected", [
    (Schema("INT8"), -2, b"-2"),
    (Schema("INT64"), 2**40, b"1099511627776"),
    (Schema("FLOAT64"), 1.5, b"1.5"),
    (Schema("FLOAT64"), 1e21, b"1.0E21"),
    (Schema("FLOAT64"), 0.0001, b"1.0E-4"),
    (Schema("FLOAT32"), 0.1, b"0.10000000149011612"),  # Java widens the float before Double.toString
    (Schema("BOOLEAN"), True, b"true"),
    (Schema("BOOLEAN"), False, b"false"),
    (Schema("STRING"), "héllo", "héllo".encode()),
    (Schema("BYTES"), b"\x00\xff", b"\x00\xff"),
    (None, "schemaless text", b"schemaless text"),  # null schema: STRING
    (Schema("STRING"), None, b""),
])
def test_top_level_encodings(schema, value, expected):
    assert encode_to_bytes(schema, value) == expected


def test_nested_values_become_protobuf_values():
    inner = Schema("STRUCT", fields=(Field("b", Schema("BYTES")), Field("f", Schema("FLOAT32")),
                                     Field("missing", Schema("STRING", optional=True))))
    schema = Schema("STRUCT", fields=(
        Field("name", Schema("STRING")), Field("n", Schema("INT32")), Field("ok", Schema("BOOLEAN")),
        Field("tags", Schema("ARRAY", value_schema=Schema("STRING"))),
        Field("by_id", Schema("MAP", key_schema=Schema("INT64"), value_schema=Schema("STRING"))),
        Field("by_bytes", Schema("MAP", key_schema=Schema("BYTES"), value_schema=Schema("FLOAT64"))),
        Field("by_double", Schema("MAP", key_schema=Schema("FLOAT64"), value_schema=Schema("BOOLEAN"))),
        Field("inner", inner)))
    value = Struct(schema, {
        "name": "x", "n": 7, "ok": True, "tags": ["a", "b"], "by_id": {12: "twelve"}, "by_bytes": {b"\x01": 2.5},
        "by_double": {1.5: False}, "inner": Struct(inner, {"b": b"\x00\x01", "f": 0.5}),
    })
    assert as_value(encode_to_bytes(schema, value)) == {
        "name": "x", "n": 7.0, "ok": True, "tags": ["a", "b"], "by_id": {"12": "twelve"},
        "by_bytes": {base64.b64encode(b"\x01").decode(): 2.5}, "by_double": {"1.5": False},
        "inner": {"b": base64.b64encode(b"\x00\x01").decode(), "f": 0.5, "missing": None},
    }


def test_map_keys_of_a_complex_type_are_rejected():
    schema = Schema("MAP", key_schema=Schema("ARRAY", value_schema=Schema("INT8")), value_schema=Schema("STRING"))
    with pytest.raises(RecordError, match="map key of type ARRAY"):
        encode_to_bytes(schema, {(1,): "x"})


def test_schemaless_json_is_encoded_by_its_own_type():
    converter = sink(**{"value.converter": JSON, "value.converter.schemas.enable": "false"})
    message = converter.convert(record(value=b'{"a": [1, "x"], "b": null}'))
    assert as_value(message.data) == {"a": [1.0, "x"], "b": None}
    assert converter.convert(record(value=b"42")).data == b"42"
    assert converter.convert(record(value=b"true")).data == b"true"


def test_record_mapping_key_value_headers_coordinates_and_time():
    converter = sink(**{"value.converter": JSON})
    message = converter.convert(record(
        key=b"k-bytes", value=envelope({"type": "int32"}, 5),
        headers=[("h", b"one"), ("h", b"two"), ("empty", None)]))
    assert message.key == b"k-bytes" and message.data == b"5"
    attributes = {k: list(v.values) for k, v in message.attributes.items()}
    assert attributes == {
        "h": [b"one", b"two"], "empty": [b""],
        "x-goog-pubsublite-source-kafka-topic": [b"orders"],
        "x-goog-pubsublite-source-kafka-partition": [b"2"],
        "x-goog-pubsublite-source-kafka-offset": [b"41"],
        "x-goog-pubsublite-source-kafka-event-time-type": [b"CreateTime"],
    }
    assert message.event_time.ToMilliseconds() == 1700000000123
    log_append = converter.convert(record(value=envelope({"type": "int32"}, 1), timestamp_type=1))
    assert list(log_append.attributes["x-goog-pubsublite-source-kafka-event-time-type"].values) == [b"LogAppendTime"]


def test_no_timestamp_means_no_event_time():
    message = sink().convert(record(value=b"v", timestamp_ms=None, timestamp_type=-1))
    assert not message.HasField("event_time")
    assert "x-goog-pubsublite-source-kafka-event-time-type" not in message.attributes


def test_oversized_message_is_a_record_error():
    with pytest.raises(RecordError, match="Pub/Sub Lite allows"):
        sink().convert(record(value=b"x" * 3_500_001))


def test_kafka_ordering_mode_routes_by_kafka_partition():
    message = sink().convert(record(value=b"v"))
    assert kafka_partition_router(3)(message, 2) == 2
    with pytest.raises(RecordError, match="needs at least as many"):
        kafka_partition_router(2)(message, 2)


def test_default_routing_is_the_libraries():
    """Keyed messages land where the client library's DefaultRoutingPolicy puts them; keyless ones rotate."""
    from google.cloud.pubsublite.internal.wire.default_routing_policy import DefaultRoutingPolicy

    route, library = default_router(5), DefaultRoutingPolicy(5)
    for key in (b"a", b"order-17", "ключ".encode(), bytes(range(40))):
        message = sink().convert(record(key=key, value=b"v"))
        assert route(message, 0) == library.route(types.PubSubMessage.wrap(message)).value
    keyless = sink().convert(record(key=None, value=b"v"))
    assert sorted(route(keyless, 0) for _ in range(10)) == sorted(list(range(5)) * 2)


def test_sink_config_rejects_a_bad_location_and_ordering_mode():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not a Pub/Sub Lite location"):
        PubSubLiteSinkConfig.model_validate({"topics": "t", "pubsublite.topic": "x", "pubsublite.project": "p",
                                             "pubsublite.location": "mars"})
    with pytest.raises(ValidationError, match="DEFAULT"):
        PubSubLiteSinkConfig.model_validate({"topics": "t", "pubsublite.topic": "x", **LITE,
                                             "pubsublite.ordering.mode": "kafka"})


def sequenced(key=b"", data=b"d", attributes=None, event_ms=None, publish_ms=1700000000000, offset=0):
    message = types.SequencedMessage.pb()(size_bytes=1)
    message.cursor.offset = offset
    message.publish_time.FromMilliseconds(publish_ms)
    message.message.key = key
    message.message.data = data
    for name, values in (attributes or {}).items():
        message.message.attributes[name].values.extend(values)
    if event_ms is not None:
        message.message.event_time.FromMilliseconds(event_ms)
    return message


def source(partitions=3):
    config = PubSubLiteSourceConfig.model_validate({"pubsublite.subscription": "s", "kafka.topic": "k", **LITE})
    return PubSubLiteSourceConverter(config, partitions)


def test_source_defaults_follow_the_reference():
    config = PubSubLiteSourceConfig.model_validate({"pubsublite.subscription": "s", "kafka.topic": "k", **LITE})
    assert config.partition_flow_control_messages == 2**63 - 1
    assert config.partition_flow_control_bytes == 20_000_000


def test_source_mapping_one_to_one():
    converter = source()
    out = converter.convert(sequenced(key=b"k1", data=b"payload", attributes={"b": [b"2"], "a": [b"1", b"3"]},
                                      event_ms=1600000000000))
    assert (out.key, out.value, out.timestamp_ms) == (b"k1", b"payload", 1600000000000)
    assert out.headers == [("a", b"1"), ("a", b"3"), ("b", b"2")]  # every value, attribute names sorted
    assert out.partition is None  # keyed: the producer's murmur2 partitioner, equal keys together
    assert converter.convert(sequenced(key=b"k1", publish_ms=1700000000999)).timestamp_ms == 1700000000999


def test_source_empty_keys_are_null_and_round_robin():
    converter = source(partitions=3)
    outs = [converter.convert(sequenced()) for _ in range(6)]
    assert all(o.key is None for o in outs)
    assert [o.partition for o in outs] == [0, 1, 2, 0, 1, 2]


def test_source_schemas_are_the_references_optional_key_and_required_value():
    """With JsonConverter envelopes the schemas show: key optional BYTES, value required BYTES."""
    import json

    config = PubSubLiteSourceConfig.model_validate({
        "pubsublite.subscription": "s", "kafka.topic": "k", **LITE,
        "key.converter": JSON, "value.converter": JSON})
    out = PubSubLiteSourceConverter(config, 1).convert(sequenced(key=b"k", data=b"v"))
    assert json.loads(out.key)["schema"] == {"type": "bytes", "optional": True}
    assert json.loads(out.value)["schema"] == {"type": "bytes", "optional": False}
