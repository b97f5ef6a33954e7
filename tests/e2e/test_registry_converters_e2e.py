"""Schema Registry converters against the real registry of the local stack (Apicurio, Confluent's API)."""

from __future__ import annotations

import os

import pytest

from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import CloudPubSubSinkConverter
from connectors.kafka.record import KafkaRecord
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.convert import PubSubLiteSinkConverter
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.s3_block_gzip_sink.lines import record_line
from tests.e2e.registry_records import CONVERTERS, json_envelope, serialized

pytestmark = pytest.mark.e2e
JSON = {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}


def _registry_keys(fmt: str) -> dict:
    return {"value.converter": CONVERTERS[fmt], "value.converter.schema.registry.url": os.environ["SCHEMA_REGISTRY_URL"]}


def _record(topic: str, value: bytes) -> KafkaRecord:
    return KafkaRecord(topic=topic, partition=0, offset=7, key=None, value=value, timestamp_ms=1, timestamp_type=0,
                       headers=[])


@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json"])
def test_the_same_record_through_json_converter_and_the_registry_converter_gives_the_same_output(stack, fmt, unique):
    topic = f"reg-{fmt}-{unique}"
    registry_bytes = [serialized(fmt, topic, i) for i in range(3)]
    assert all(b[0] == 0 for b in registry_bytes)  # the real wire format: magic byte, schema id

    cloud = {"topics": topic, "cps.project": "p", "cps.topic": "t"}
    ours = CloudPubSubSinkConverter(CloudPubSubSinkConfig.model_validate({**cloud, **_registry_keys(fmt)}))
    reference = CloudPubSubSinkConverter(CloudPubSubSinkConfig.model_validate({**cloud, **JSON}))
    lite = {"topics": topic, "pubsublite.project": "p", "pubsublite.location": "us-central1-a",
            "pubsublite.topic": "t"}
    lite_ours = PubSubLiteSinkConverter(PubSubLiteSinkConfig.model_validate({**lite, **_registry_keys(fmt)}))
    lite_reference = PubSubLiteSinkConverter(PubSubLiteSinkConfig.model_validate({**lite, **JSON}))
    s3 = {"topics": topic, "s3.bucket": "archive"}
    s3_ours = S3BlockGzipSinkConfig.model_validate({**s3, **_registry_keys(fmt)}).value_converter_instance()
    s3_reference = S3BlockGzipSinkConfig.model_validate({**s3, **JSON}).value_converter_instance()

    for i, raw in enumerate(registry_bytes):
        message = ours.convert(_record(topic, raw))
        assert message == reference.convert(_record(topic, json_envelope(i)))
        assert message.data == b"\x00body\xff" and message.attributes["name"] == f"order-{i}"
        assert message.attributes["day"] == "Tue Nov 24 00:00:00 UTC 2026"
        assert message.attributes["tags"] == f"[a, t{i}]" and "note" not in message.attributes
        assert lite_ours.convert(_record(topic, raw)) == lite_reference.convert(_record(topic, json_envelope(i)))
        assert record_line(s3_ours, raw) == record_line(s3_reference, json_envelope(i))


def test_a_protobuf_schema_registered_as_proto_text_decodes(stack, unique):
    """Java's serializers register .proto text, not a serialized descriptor: both must read."""
    from confluent_kafka.schema_registry import Schema as RegistrySchema

    from connectors.kafka_connect.registry.wire import header
    from tests.e2e.registry_records import protobuf_order_class, registry

    text = ('syntax = "proto3";\npackage shop;\nimport "google/type/date.proto";\n'
            'message Other { string x = 1; }\n'
            'message Order {\n  int64 id = 1;\n  string name = 2;\n  google.type.Date day = 3;\n'
            '  repeated string tags = 5;\n  optional string note = 6;\n  bytes cps_message_body = 7;\n'
            '  Status status = 8;\n  enum Status { NEW = 0; PAID = 1; }\n  map<string, int32> counts = 9;\n}\n')
    schema_id = registry().register_schema(f"proto-text-{unique}-value", RegistrySchema(text, "PROTOBUF"))
    order = protobuf_order_class()(id=3, name="n", tags=["x"], cps_message_body=b"b")
    order.day.year, order.day.month, order.day.day = 2026, 11, 24
    # Order is the second message of the file: message indexes [1] (count 1, index 1, zig-zag encoded).
    raw = header(schema_id) + b"\x02\x02" + order.SerializeToString() + b"\x40\x01" + b"\x4a\x05\x0a\x01c\x10\x02"
    converter = CloudPubSubSinkConfig.model_validate(
        {"topics": "t", "cps.project": "p", "cps.topic": "t", **_registry_keys("protobuf")}).value_converter_instance()
    schema, value = converter.to_connect(raw)
    assert schema.name == "shop.Order"
    assert [f.name for f in schema.fields] == ["id", "name", "day", "tags", "note", "cps_message_body", "status",
                                               "counts"]
    assert value.get("id") == 3 and value.get("day").isoformat() == "2026-11-24" and value.get("note") is None
    assert value.get("status") == "PAID" and value.get("counts") == {"c": 2} and value.get("tags") == ["x"]


@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json"])
def test_a_source_writes_bytes_that_confluents_own_deserializers_read(stack, fmt, unique):
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
    from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter, PubSubMessageIn
    from tests.e2e.registry_records import registry

    topic = f"src-{fmt}-{unique}"
    config = CloudPubSubSourceConfig.model_validate({
        "cps.project": "p", "cps.subscription": "s", "kafka.topic": topic, "kafka.key.attribute": "user",
        **_registry_keys(fmt), "key.converter": CONVERTERS[fmt],
        "key.converter.schema.registry.url": os.environ["SCHEMA_REGISTRY_URL"]})
    converter = CloudPubSubSourceConverter(config)
    record = converter.convert(PubSubMessageIn(data=b"payload", attributes={"user": "ann", "shop": "north"},
                                               ordering_key="", publish_time_ms=1000))
    subjects = registry().get_subjects()
    assert f"{topic}-value" in subjects and f"{topic}-key" in subjects  # TopicNameStrategy, both roles

    value_ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    if fmt == "avro":
        assert AvroDeserializer(registry())(record.value, value_ctx) == {"message": b"payload", "shop": "north"}
        assert AvroDeserializer(registry())(record.key, key_ctx) == "ann"
    elif fmt == "json":
        assert JSONDeserializer(None, schema_registry_client=registry())(record.value, value_ctx) == {
            "message": "cGF5bG9hZA==", "shop": "north"}
        assert JSONDeserializer(None, schema_registry_client=registry())(record.key, key_ctx) == "ann"
    else:
        # The deserializer needs a message class: the one registered, rebuilt from the registry's schema.
        from connectors.kafka_connect.registry.converters import ProtobufConverter
        from connectors.kafka_connect.registry.wire import split_header, split_message_indexes
        from google.protobuf.message_factory import GetMessageClass

        reader = ProtobufConverter(config.value_converter_instance().settings)
        schema_id, payload = split_header(record.value)
        parsed = reader._reader(schema_id)
        message_class = GetMessageClass(parsed.message(split_message_indexes(payload)[0]))
        message = ProtobufDeserializer(message_class, {"use.deprecated.format": False}, registry())(
            record.value, value_ctx)
        assert message.message == b"payload" and message.shop == "north"
    assert converter.convert(PubSubMessageIn(data=b"other", attributes={"user": "bob", "shop": "south"},
                                             ordering_key="", publish_time_ms=1000)).value[1:5] \
        == record.value[1:5]  # the same schema: registered once, the same id


def test_bad_input_is_a_conversion_error_naming_what_is_wrong_and_never_the_credentials(stack, unique):
    from connectors.kafka_connect.errors import ConversionError
    from connectors.kafka_connect.registry.wire import header

    converter = CloudPubSubSinkConfig.model_validate(
        {"topics": "t", "cps.project": "p", "cps.topic": "t", **_registry_keys("avro")}).value_converter_instance()
    good = serialized("avro", f"bad-{unique}", 1)
    cases = {
        b'{"plain": "json"}': "not in the Schema Registry wire format: the first byte is 0x7b",
        header(987654) + good[5:]: "schema id 987654: Schema Registry: fetching schema id 987654 failed",
        good[:12]: "do not match their Avro schema",
    }
    for raw, expected in cases.items():
        with pytest.raises(ConversionError, match=expected):
            converter.to_connect(raw)

    secret = "s3cr3t-pass"
    down = CloudPubSubSinkConfig.model_validate({
        "topics": "t", "cps.project": "p", "cps.topic": "t", "value.converter": CONVERTERS["avro"],
        "value.converter.schema.registry.url": f"http://reader:{secret}@127.0.0.1:9/apis/ccompat/v7",
        "value.converter.basic.auth.credentials.source": "USER_INFO",
        "value.converter.basic.auth.user.info": f"svc:{secret}"}).value_converter_instance()
    with pytest.raises(ConversionError) as failure:
        down.to_connect(good)
    assert "fetching schema id" in str(failure.value) and secret not in str(failure.value)
    assert secret not in repr(down.settings)


def test_an_avro_topic_moves_through_the_cloud_sink_bridge_and_bad_records_are_dead_lettered(
        stack, spark, tmp_path, unique):
    from bridge_assets.definitions import build_definitions
    from tests.e2e.helpers import create_pubsub_topic, drain, kafka_admin, materialize_bridge, produce, sink_bridges_file
    from tests.e2e.test_cloud_pubsub_sink_failures import _read_topic

    topic, dlq, name = f"avro-{unique}", f"avro-dlq-{unique}", f"avro_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    kafka_admin().create_topic(dlq, partitions=1)
    subscription = create_pubsub_topic(topic)
    records = [(f"k{i}", serialized("avro", topic, i)) for i in range(200)]
    records[50] = ("k50", b"not avro at all")
    produce(topic, records)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **_registry_keys("avro"), "metadata.publish": True, "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.context.headers.enable": True}))

    metadata = materialize_bridge(defs, name)
    messages = drain(subscription)
    assert sorted(int(m.attributes["id"]) for m in messages) == [i for i in range(200) if i != 50]
    assert all(m.data == b"\x00body\xff" and m.attributes["day"].startswith("Tue Nov 24") for m in messages)
    assert metadata["records_dead_lettered"].value == 1
    [dead] = _read_topic(dlq, 1)
    headers = dict(dead.headers())
    assert dead.value() == b"not avro at all" and headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert b"magic byte" in headers["__connect.errors.exception.message"]


def test_use_latest_version_writes_with_the_subjects_latest_schema_and_lookup_needs_it_registered(stack, unique):
    from connectors.kafka_connect.errors import ConversionError
    from connectors.kafka_connect.data import OPTIONAL_STRING
    from connectors.kafka_connect.registry.wire import split_header
    from tests.e2e.registry_records import registry

    topic = f"latest-{unique}"
    keys = {"cps.project": "p", "cps.subscription": "s", "kafka.topic": topic, **_registry_keys("avro"),
            "value.converter.auto.register.schemas": False}
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig

    lookup_only = CloudPubSubSourceConfig.model_validate(keys).value_converter_instance()
    with pytest.raises(ConversionError, match=f"looking up the schema under subject {topic}-value"):
        lookup_only.from_connect(OPTIONAL_STRING, "x", topic)  # nothing registered, and no auto-registration

    from confluent_kafka.schema_registry import Schema as RegistrySchema

    schema_id = registry().register_schema(f"{topic}-value", RegistrySchema('["null", "string"]', "AVRO"))
    latest = CloudPubSubSourceConfig.model_validate(
        {**keys, "value.converter.use.latest.version": True}).value_converter_instance()
    written = latest.from_connect(OPTIONAL_STRING, "hello", topic)
    assert split_header(written)[0] == schema_id
    assert latest.to_connect(written) == (OPTIONAL_STRING, "hello")
