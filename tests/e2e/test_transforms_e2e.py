"""Kafka Connect's transforms on the local stack: the issue's connector file as it is through the Cloud Pub/Sub sink;
a chain of six of Kafka's transforms there on JSON records with headers and routing, with a record a transform
cannot handle dead-lettered at the TRANSFORMATION stage; and a chain of four in the Cloud Pub/Sub source that
filters, reshapes and routes what it writes to Kafka."""

from __future__ import annotations

import base64
import json
import textwrap

import pytest

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import PROJECT, create_pubsub_topic, drain, kafka_admin, materialize_bridge, produce, sink_bridges_file
from tests.e2e.test_cloud_pubsub_sink_failures import JSON_VALUES, _read_topic

pytestmark = pytest.mark.e2e


def test_a_connect_file_with_an_insert_header_and_a_tombstone_filter_moves_what_a_worker_would(
        stack, spark, tmp_path, unique):
    topic, name = f"tf-file-{unique}", f"orders_sink_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    (tmp_path / "sink.properties").write_text(textwrap.dedent(f"""\
        name={name}
        connector.class=com.google.pubsub.kafka.sink.CloudPubSubSinkConnector
        topics={topic}
        cps.project={PROJECT}
        cps.topic={topic}
        key.converter=org.apache.kafka.connect.storage.StringConverter
        value.converter=org.apache.kafka.connect.storage.StringConverter
        headers.publish=true
        transforms=addSource,dropTomb
        transforms.addSource.type=org.apache.kafka.connect.transforms.InsertHeader
        transforms.addSource.header=source
        transforms.addSource.value.literal=kafka
        transforms.dropTomb.type=org.apache.kafka.connect.transforms.Filter
        transforms.dropTomb.predicate=isTomb
        predicates=isTomb
        predicates.isTomb.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone
        """))
    (tmp_path / "bridges.yaml").write_text("bridges:\n  - properties: sink.properties\n    mode: batch\n")
    produce(topic, [(f"k{i}", None if i % 4 == 3 else f"v{i}") for i in range(12)])

    metadata = materialize_bridge(build_definitions(str(tmp_path / "bridges.yaml")), name)
    messages = drain(subscription)
    # Without the filter a tombstone becomes a message with the key alone; with it, the three are gone.
    assert sorted(m.data for m in messages) == sorted(f"v{i}".encode() for i in range(12) if i % 4 != 3)
    assert all(dict(m.attributes) == {"key": m.data.decode().replace("v", "k"), "source": "kafka"} for m in messages)
    assert metadata["records_published"].value == 9


def test_a_chain_of_transforms_rewrites_keys_values_headers_and_the_topic_and_dead_letters_what_it_cannot(
        stack, spark, tmp_path, unique):
    topic, dlq, name = f"tf-orders-{unique}", f"tf-dlq-{unique}", f"tf_chain_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    kafka_admin().create_topic(dlq, partitions=1)
    routed = create_pubsub_topic(f"out-{unique}")
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        **JSON_VALUES, "key.converter": None, "messageFormat": "json", "headers.publish": True,
        "cps.topic": "out-${topic}", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": True,
        "transforms": "route,key,id,mask,mail,drop",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": f"tf-orders-({unique})", "transforms.route.replacement": "$1",
        "transforms.key.type": "ValueToKey", "transforms.key.fields": "id",
        "transforms.id.type": "ExtractField$Key", "transforms.id.field": "id",
        "transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "card",
        "transforms.mail.type": "HeaderFrom$Value", "transforms.mail.fields": "email",
        "transforms.mail.headers": "email", "transforms.mail.operation": "move",
        "transforms.drop.type": "DropHeaders", "transforms.drop.headers": "secret"}))
    orders = [json.dumps({"id": i, "card": f"4111-{i}", "email": f"u{i}@x.org"}) for i in range(5)]
    produce(topic, [(None, value) for value in orders[:2]] + [(None, '"not an order"')] +
            [(None, value) for value in orders[2:]], headers=[("secret", b"s"), ("trace", b"t")])

    metadata = materialize_bridge(defs, name)
    messages = sorted(drain(routed), key=lambda m: int(m.attributes["key"]))
    assert [json.loads(m.data) for m in messages] == [{"id": i, "card": ""} for i in range(5)]
    assert [dict(m.attributes) for m in messages] == [
        {"key": str(i), "trace": "t", "email": f"u{i}@x.org"} for i in range(5)]
    assert metadata["records_dead_lettered"].value == 1

    [dead] = _read_topic(dlq, 1)
    headers = dict(dead.headers())
    assert dead.value() == b'"not an order"'
    assert headers["__connect.errors.stage"] == b"TRANSFORMATION"
    assert b"transform 'key' (ValueToKey)" in headers["__connect.errors.exception.message"]


def test_a_source_chain_routes_filters_and_reshapes_the_records_it_writes(stack, spark, tmp_path, unique):
    from tests.e2e.helpers import cloud_source_bridges_file, publish_pubsub_messages
    from tests.e2e.test_cloud_pubsub_source_e2e import _consume_all

    topic, name = f"tf-src-{unique}", f"tf_src_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    kafka_admin().create_topic(f"{topic}-eu", partitions=1)
    subscription = create_pubsub_topic(topic)
    publish_pubsub_messages(topic, [(f"m{i}".encode(), {"region": "eu", **({"test": "1"} if i % 5 == 0 else {})})
                                    for i in range(20)])
    defs = build_definitions(cloud_source_bridges_file(tmp_path, name, subscription, topic, {
        "kafka.record.headers": True, "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": False,
        "transforms": "skipTests,wrap,stamp,route",
        "transforms.skipTests.type": "Filter", "transforms.skipTests.predicate": "isTest",
        "transforms.wrap.type": "HoistField$Value", "transforms.wrap.field": "payload",
        "transforms.stamp.type": "InsertField$Value", "transforms.stamp.static.field": "origin",
        "transforms.stamp.static.value": "pubsub",
        "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-eu",
        "predicates": "isTest", "predicates.isTest.type": "HasHeaderKey", "predicates.isTest.name": "test"}))

    metadata = materialize_bridge(defs, name)
    records = _consume_all(f"{topic}-eu", 16)
    # The messages' data are BYTES: JsonConverter writes them as base64 inside the struct HoistField made.
    assert sorted(json.loads(r.value())["payload"] for r in records) == sorted(
        base64.b64encode(f"m{i}".encode()).decode() for i in range(20) if i % 5)
    assert all(json.loads(r.value())["origin"] == "pubsub" and r.headers() == [("region", b"eu")] for r in records)
    assert _consume_all(topic, 0, timeout_s=3) == []  # routed away from kafka.topic
    assert metadata["messages_acked"].value == 20 and metadata["records_written"].value == 16
    assert drain(subscription) == []  # the filtered messages were acked too
