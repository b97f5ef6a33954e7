"""messageFormat=json and messageFormat=topic-schema (beyond the reference) through the Cloud Pub/Sub sink."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import json_reader, parse_schema, schemaless_reader, schemaless_writer
from google.cloud import pubsub_v1
from google.pubsub_v1.types import Encoding, Schema, SchemaSettings

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import PROJECT, drain, kafka_admin, materialize_bridge, produce, sink_bridges_file
from tests.e2e.registry_records import AVRO_SCHEMA, AT, BODY, DAY, serialized
from tests.e2e.test_registry_converters_e2e import _registry_keys

pytestmark = pytest.mark.e2e

ORDER_PROTO = 'syntax = "proto3";\nmessage Order {\n  int64 id = 1;\n  string name = 2;\n  repeated string tags = 3;\n}\n'
JSON_STRUCTS = {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}


def _schema_topic(topic: str, kind, definition: str, encoding) -> str:
    """A Pub/Sub topic with a schema and a subscription; the subscription path."""
    schemas = pubsub_v1.SchemaServiceClient()
    schema = schemas.create_schema(parent=f"projects/{PROJECT}", schema_id=f"{topic}-schema",
                                   schema=Schema(type_=kind, definition=definition))
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic_path = publisher.topic_path(PROJECT, topic)
    publisher.create_topic(request={"name": topic_path,
                                    "schema_settings": SchemaSettings(schema=schema.name, encoding=encoding)})
    subscription = subscriber.subscription_path(PROJECT, f"{topic}-sub")
    subscriber.create_subscription(name=subscription, topic=topic_path)
    return subscription


def _order_envelope(i: int, with_tags: bool = True) -> str:
    fields = [{"field": "id", "type": "int64"}, {"field": "name", "type": "string"}]
    payload = {"id": i, "name": f"n{i}"}
    if with_tags:
        fields.append({"field": "tags", "type": "array", "items": {"type": "string"}})
        payload["tags"] = ["a", str(i)]
    return json.dumps({"schema": {"type": "struct", "fields": fields}, "payload": payload})


@pytest.mark.parametrize("encoding", [Encoding.BINARY, Encoding.JSON])
def test_avro_records_are_published_in_the_avro_schema_of_the_pubsub_topic(stack, spark, tmp_path, unique, encoding):
    topic, name = f"tsa-{encoding.name.lower()}-{unique}", f"tsa_{encoding.name.lower()}_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = _schema_topic(topic, Schema.Type.AVRO, AVRO_SCHEMA, encoding)
    produce(topic, [(None, serialized("avro", topic, i)) for i in range(20)])
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **_registry_keys("avro"), "messageFormat": "topic-schema"}))

    assert materialize_bridge(defs, name)["records_published"].value == 20
    parsed = parse_schema(json.loads(AVRO_SCHEMA))
    decoded = []
    for message in drain(subscription):
        if encoding == Encoding.BINARY:
            decoded.append(schemaless_reader(io.BytesIO(message.data), parsed, None))
        else:
            decoded.extend(json_reader(io.StringIO(message.data.decode()), parsed))
        assert not message.attributes  # the fields are in the data, not attributes
    assert sorted(d["id"] for d in decoded) == list(range(20))
    assert all(d["day"] == DAY and d["at"] == AT and d["cps_message_body"] == BODY and d["note"] is None
               for d in decoded)


@pytest.mark.parametrize("encoding", [Encoding.BINARY, Encoding.JSON])
def test_structs_are_published_in_the_protobuf_schema_of_the_topic_and_misfits_are_dead_lettered(
        stack, spark, tmp_path, unique, encoding):
    from google.protobuf import json_format

    from connectors.kafka_connect.registry.protobuf_data import compile_proto_text, new_pool
    from google.protobuf.message_factory import GetMessageClass

    topic, name, dlq = f"tsp-{encoding.name.lower()}-{unique}", f"tsp_{encoding.name.lower()}_{unique}", f"tsp-dlq-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    kafka_admin().create_topic(dlq, partitions=1)
    subscription = _schema_topic(topic, Schema.Type.PROTOCOL_BUFFER, ORDER_PROTO, encoding)
    misfit = json.dumps({"schema": {"type": "struct", "fields": [{"field": "colour", "type": "string"}]},
                         "payload": {"colour": "red"}})
    produce(topic, [(None, _order_envelope(i)) for i in range(5)] + [(None, misfit)])
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **JSON_STRUCTS, "messageFormat": "topic-schema", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq}))

    metadata = materialize_bridge(defs, name)
    assert metadata["records_published"].value == 5 and metadata["records_dead_lettered"].value == 1
    # The message class comes from the same definition the topic holds.
    order_class = GetMessageClass(new_pool().Add(compile_proto_text("o.proto", ORDER_PROTO, [])).message_types_by_name["Order"])
    orders = []
    for message in drain(subscription):
        order = order_class()
        if encoding == Encoding.BINARY:
            order.ParseFromString(message.data)
        else:
            json_format.Parse(message.data.decode(), order)
        orders.append((order.id, order.name, list(order.tags)))
    assert sorted(orders) == [(i, f"n{i}", ["a", str(i)]) for i in range(5)]


def test_json_text_publishes_the_whole_value_as_json(stack, spark, tmp_path, unique):
    import base64

    from tests.e2e.helpers import create_pubsub_topic

    topic, name = f"jt-{unique}", f"jt_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    produce(topic, [("k2", serialized("avro", topic, 2))])
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {"messageFormat": "json",
                                                                       **_registry_keys("avro")}))
    materialize_bridge(defs, name)
    [message] = drain(subscription)
    # JsonConverter's payload form: logical types as their numbers, bytes as base64.
    assert json.loads(message.data) == {
        "id": 2, "name": "order-2", "day": 20781, "at": int(AT.timestamp() * 1000), "tags": ["a", "t2"],
        "note": None, "cps_message_body": base64.b64encode(BODY).decode()}
    assert message.attributes == {"key": "k2"}


@pytest.mark.parametrize("encoding", [Encoding.BINARY, Encoding.JSON])
def test_the_source_decodes_messages_of_a_schema_topic_into_structs_the_avro_converter_writes(
        stack, spark, tmp_path, unique, encoding):
    import yaml
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from fastavro import json_writer

    from tests.e2e.registry_records import record_values, registry
    from tests.e2e.helpers import publish_pubsub_messages
    from tests.e2e.test_cloud_pubsub_source_e2e import _consume_all

    topic, kafka_topic, name = f"srcs-{encoding.name.lower()}-{unique}", f"srcs-{unique}", f"srcs_{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    subscription = _schema_topic(topic, Schema.Type.AVRO, AVRO_SCHEMA, encoding)
    parsed = parse_schema(json.loads(AVRO_SCHEMA))
    messages = []
    for i in range(10):
        out = io.StringIO() if encoding == Encoding.JSON else io.BytesIO()
        if encoding == Encoding.JSON:
            json_writer(out, parsed, [record_values(i)])
            messages.append((out.getvalue().strip().encode(), {"source": "shop"}))
        else:
            schemaless_writer(out, parsed, record_values(i))
            messages.append((out.getvalue(), {"source": "shop"}))
    messages.append((b"garbage", {"source": "shop"}))
    publish_pubsub_messages(topic, messages)
    config = {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1], "kafka.topic": kafka_topic,
              "messageFormat": "topic-schema", "errors.tolerance": "all", **_registry_keys("avro")}
    (tmp_path / "bridges.yaml").write_text(yaml.safe_dump({"bridges": [
        {"name": name, "connector": "CloudPubSubSourceConnector", "mode": "batch", "config": config}]}))

    materialize_bridge(build_definitions(str(tmp_path / "bridges.yaml")), name)
    records = _consume_all(kafka_topic, 10)
    read = AvroDeserializer(registry())
    values = sorted((read(r.value(), SerializationContext(kafka_topic, MessageField.VALUE)) for r in records),
                    key=lambda v: v["id"])
    assert [v["id"] for v in values] == list(range(10))  # the garbage message was skipped (tolerance all)
    assert values[3] == {**record_values(3), "at": AT}
    assert all(dict(r.headers())["source"] == b"shop" for r in records)
