"""Kafka Connect's transforms and predicates as a bridges file gives them: the chain a .properties file describes
loads, every problem of it is refused at once in a line naming the key, and the Cloud Pub/Sub sink runs the chain
where a Connect worker does (after the converters, before the record becomes a message)."""

from __future__ import annotations

import json
import textwrap

import pytest
from pydantic import ValidationError

from connectors.bridges_file import BridgeConfigError, load_bridges
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import CloudPubSubSinkConverter
from connectors.config.common import ConnectorConfig
from connectors.kafka.record import KafkaRecord
from connectors.transforms.chain import TransformFailed, load_chain

# The issue's file: a Cloud Pub/Sub sink with two of Kafka's transforms and a predicate.
SINK = textwrap.dedent("""\
    name=orders_sink
    connector.class=com.google.pubsub.kafka.sink.CloudPubSubSinkConnector
    topics=orders
    cps.project=demo
    cps.topic=orders
    transforms=addSource,dropTomb
    transforms.addSource.type=org.apache.kafka.connect.transforms.InsertHeader
    transforms.addSource.header=source
    transforms.addSource.value.literal=kafka
    transforms.dropTomb.type=org.apache.kafka.connect.transforms.Filter
    transforms.dropTomb.predicate=isTomb
    predicates=isTomb
    predicates.isTomb.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone
    """)


def _load(tmp_path, properties: str):
    (tmp_path / "sink.properties").write_text(properties)
    (tmp_path / "bridges.yaml").write_text("bridges:\n  - properties: sink.properties\n")
    return load_bridges(tmp_path / "bridges.yaml")


def test_a_connect_file_with_transforms_and_a_predicate_loads_as_it_is(tmp_path):
    [bridge] = _load(tmp_path, SINK)
    stages = bridge.config.transforms.stages
    assert [(s.alias, s.class_name) for s in stages] == [("addSource", "InsertHeader"), ("dropTomb", "Filter")]
    assert stages[1].predicate.alias == "isTomb" and not stages[1].negate


def test_every_problem_of_a_chain_is_refused_at_once_naming_the_key(tmp_path):
    broken = (SINK.replace("transforms.addSource.header=source", "transforms.addSource.hedaer=source")
              .replace("org.apache.kafka.connect.transforms.Filter", "org.apache.kafka.connect.transforms.Filtre")
              .replace("predicates=isTomb", "predicates=isTombstone")
              + "transforms.old.type=Filter\ntransforms.mask.type=MaskField\n")
    with pytest.raises(BridgeConfigError) as refused:
        _load(tmp_path, broken.replace("transforms=addSource,dropTomb", "transforms=addSource,dropTomb,mask"))
    lines = str(refused.value).splitlines()[1:]
    assert all(line.startswith("  bridge 'orders_sink': key 'transforms.") or "key 'predicates" in line
               for line in lines), lines
    text = str(refused.value)
    assert "key 'transforms.addSource.hedaer': unknown key (did you mean 'transforms.addSource.header'?" in text
    assert "key 'transforms.addSource.header': required, not set (transform 'addSource' (InsertHeader))" in text
    assert "key 'transforms.dropTomb.type': unknown transform class 'org.apache.kafka.connect.transforms.Filtre'" in text
    assert "key 'predicates.isTomb.type': 'isTomb' is not listed in 'predicates'" in text
    assert "key 'predicates.isTombstone.type': required, not set" in text
    assert "key 'transforms.old.type': 'old' is not listed in 'transforms'" in text
    assert "MaskField works on the key or the value: name MaskField$Key or MaskField$Value" in text


@pytest.mark.parametrize("keys, problem", [
    ({"transforms": "a,a", "transforms.a.type": "Filter"}, "key 'transforms': 'a' is listed twice"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "true"},
     "key 'transforms.a.negate': needs transforms.a.predicate"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"},
     "key 'transforms.a.predicate': 'p' is not in 'predicates'"),
    ({"transforms": "r", "transforms.r.type": "RegexRouter", "transforms.r.regex": "(", "transforms.r.replacement": "x"},
     "key 'transforms.r.regex': not a valid regular expression"),
    ({"transforms": "r", "transforms.r.type": "RegexRouter", "transforms.r.regex": "a", "transforms.r.replacement": "$"},
     "key 'transforms.r.replacement': a '$' in the replacement must name a group"),
    ({"transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "a:array"},
     "cannot cast to 'array'"),
    ({"transforms": "i", "transforms.i.type": "InsertField$Value"}, "no field to insert"),
    ({"transforms": "t", "transforms.t.type": "TimestampConverter$Value", "transforms.t.target.type": "string"},
     "target.type=string needs format"),
    ({"transforms": "h", "transforms.h.type": "HeaderFrom$Value", "transforms.h.fields": "a,b",
      "transforms.h.headers": "x", "transforms.h.operation": "copy"}, "must have the same number of items"),
    ({"transforms": "d", "transforms.d.type": "DropHeaders$Value", "transforms.d.headers": "x"},
     "DropHeaders has no $Value variant"),
])
def test_a_bad_chain_is_one_line_naming_what_is_wrong(keys, problem):
    with pytest.raises(ValueError) as refused:
        load_chain(keys)
    assert problem in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1


def test_a_connector_that_does_not_run_transforms_refuses_them_in_one_line():
    class NoTransforms(ConnectorConfig):  # a plugin's config without TransformKeys
        topics: str

    with pytest.raises(ValidationError, match="key 'transforms': this connector does not run Kafka Connect transforms"):
        NoTransforms.model_validate({"topics": "a", "transforms": "f", "transforms.f.type": "Filter"})


def _converter(**keys) -> CloudPubSubSinkConverter:
    base = {"topics": "orders", "cps.project": "p", "cps.topic": "out", "headers.publish": "true"}
    return CloudPubSubSinkConverter(CloudPubSubSinkConfig.model_validate({**base, **keys}))


def test_the_sink_runs_the_chain_between_the_converters_and_the_message():
    chain = {"transforms": "addSource,dropTomb", "transforms.addSource.type": "InsertHeader",
             "transforms.addSource.header": "source", "transforms.addSource.value.literal": "kafka",
             "transforms.dropTomb.type": "Filter", "transforms.dropTomb.predicate": "isTomb",
             "predicates": "isTomb", "predicates.isTomb.type": "RecordIsTombstone"}
    converter = _converter(**chain)
    message = converter.convert(KafkaRecord("orders", 0, 1, b"k", b"v", 1000, headers=[("trace", b"t")]))
    assert (message.data, message.attributes) == (b"v", {"key": "k", "trace": "t", "source": "kafka"})
    assert converter.convert(KafkaRecord("orders", 0, 2, b"k", None, 1000)) is None  # the tombstone is dropped


def test_the_sink_reads_json_fields_a_transform_made_and_routes_by_the_new_topic():
    converter = _converter(**{
        "cps.topic": "kafka-${topic}", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false", "messageFormat": "json",
        "transforms": "route,mask,key", "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)s",
        "transforms.route.replacement": "$1", "transforms.mask.type": "MaskField$Value",
        "transforms.mask.fields": "email", "transforms.key.type": "ValueToKey", "transforms.key.fields": "id"})
    message = converter.convert(KafkaRecord("orders", 0, 1, None, b'{"id": 7, "email": "a@b.c"}', 1000))
    assert message.topic == "order"
    assert message.data == b'{"id":7,"email":""}'
    assert message.attributes["key"] == "{id=7}"  # the key a transform made, as Java's toString writes a map


def test_a_record_a_transform_cannot_handle_is_a_transformation_error():
    converter = _converter(**{"transforms": "x", "transforms.x.type": "ExtractField$Value",
                              "transforms.x.field": "id"})
    # ByteArrayConverter's value has a BYTES schema, so the transform wants a struct (as Kafka's does).
    with pytest.raises(TransformFailed, match="transform 'x' \\(ExtractField\\$Value\\): only structs") as failed:
        converter.convert(KafkaRecord("orders", 0, 1, None, b"not a map", 1000))
    assert failed.value.stage == "TRANSFORMATION"


def _source(**keys):
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
    from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter

    return CloudPubSubSourceConverter(CloudPubSubSourceConfig.model_validate(
        {"cps.project": "p", "cps.subscription": "s", "kafka.topic": "orders",
         "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
         "key.converter": "org.apache.kafka.connect.storage.StringConverter", **keys}))


def test_a_source_runs_the_chain_on_the_record_it_made_before_the_converters():
    from connectors.cloud_pubsub_source.convert import PubSubMessageIn

    converter = _source(**{
        "kafka.record.headers": "true",
        "transforms": "wrap,stamp,route,skip", "transforms.wrap.type": "HoistField$Value",
        "transforms.wrap.field": "data", "transforms.stamp.type": "InsertField$Value",
        "transforms.stamp.topic.field": "from", "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-v2",
        "transforms.skip.type": "Filter", "transforms.skip.predicate": "test", "predicates": "test",
        "predicates.test.type": "HasHeaderKey", "predicates.test.name": "test"})
    record = converter.convert(PubSubMessageIn(b"hi", {"region": "eu"}, "", 1000))
    # The message's data is BYTES: JsonConverter writes it as base64, inside the struct HoistField made.
    assert json.loads(record.value) == {"data": "aGk=", "from": "orders"}
    assert record.topic == "orders-v2" and record.headers == [("region", b"eu")]
    assert converter.convert(PubSubMessageIn(b"x", {"test": "1"}, "", 1000)) is None


def test_a_source_record_a_transform_cannot_handle_is_a_message_error():
    from connectors.cloud_pubsub_source.convert import MessageError, PubSubMessageIn

    converter = _source(**{"transforms": "x", "transforms.x.type": "ExtractField$Value", "transforms.x.field": "f"})
    with pytest.raises(MessageError, match="transform 'x' \\(ExtractField\\$Value\\)"):
        converter.convert(PubSubMessageIn(b"hi", {}, "", 1000))


def test_a_message_a_transform_drops_is_acked_and_not_written():
    from connectors.cloud_pubsub_source import write
    from tests.unit.test_cloud_pubsub_source_delivery import HeldProducer, Subscriber, received

    converter = _source(**{"transforms": "f", "transforms.f.type": "Filter"})
    producer, subscriber = HeldProducer(), Subscriber()
    delivery = write._Delivery(converter.config, producer)
    with write.PulledDelivery(subscriber, "sub", delivery) as pulls:
        pulls.deliver(converter, received(b"a", b"b"))
    assert sorted(subscriber.acked) == ["ack-a", "ack-b"] and producer.waiting == []
    assert delivery.totals == {"pulled": 2, "acked": 2, "dropped": 0} and not delivery.written


def test_bridgectl_adds_the_issues_file_as_it_is_and_writes_nothing_for_a_broken_chain(tmp_path):
    from click.testing import CliRunner

    from bridgectl.bridges_cli import bridges

    path = tmp_path / "bridges.yaml"
    path.write_text("bridges: []\n")
    (tmp_path / "sink.properties").write_text(SINK)
    (tmp_path / "broken.properties").write_text(SINK.replace("name=orders_sink", "name=broken")
                                                .replace("transforms.addSource.header=source\n", ""))
    common = ["--file", str(path), "--url", "http://127.0.0.1:9"]  # no deployment there: the file only
    added = CliRunner().invoke(bridges, ["add", "orders_sink", "--properties", str(tmp_path / "sink.properties"),
                                         *common])
    assert added.exit_code == 0, added.output
    assert [b.name for b in load_bridges(path)] == ["orders_sink"]

    before = path.read_text()
    refused = CliRunner().invoke(bridges, ["add", "--properties", str(tmp_path / "broken.properties"), *common])
    assert isinstance(refused.exception, BridgeConfigError)
    assert "key 'transforms.addSource.header': required, not set" in str(refused.exception)
    assert path.read_text() == before


def test_the_lite_source_runs_the_chain_before_its_converters_and_counts_what_it_drops():
    from types import SimpleNamespace

    from connectors.pubsublite_source.config import PubSubLiteSourceConfig
    from connectors.pubsublite_source.convert import PubSubLiteSourceConverter
    from connectors.pubsublite_source.write import write_batch
    from tests.unit.test_pubsublite_convert import LITE, sequenced

    config = PubSubLiteSourceConfig.model_validate({
        "pubsublite.subscription": "s", "kafka.topic": "orders", **LITE,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        "transforms": "skip,wrap,route", "transforms.skip.type": "Filter", "transforms.skip.predicate": "test",
        "transforms.wrap.type": "HoistField$Value", "transforms.wrap.field": "data",
        "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-x",
        "predicates": "test", "predicates.test.type": "HasHeaderKey", "predicates.test.name": "test"})
    converter = PubSubLiteSourceConverter(config, 1)
    record = converter.convert(sequenced(key=b"k", data=b"hi", attributes={"a": [b"1"]}))
    assert json.loads(record.value) == {"data": "aGk="} and record.topic == "orders-x"
    assert record.headers == [("a", b"1")]

    produced = []
    writer = SimpleNamespace(filtered=0, producer=SimpleNamespace(poll=lambda timeout: None),
                             write=lambda record, where: produced.append(record) or True)
    write_batch(converter, writer, 0, [sequenced(data=b"a"), sequenced(data=b"b", attributes={"test": [b"1"]})])
    assert len(produced) == 1 and writer.filtered == 1


def test_lineage_follows_a_router_where_the_topic_alone_decides(tmp_path):
    from connectors.cloud_pubsub_sink.plugin import CONNECTOR as CLOUD_SINK
    from connectors.pubsublite_sink.plugin import CONNECTOR as LITE_SINK

    router = {"transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
              "transforms.route.regex": "orders-(.*)", "transforms.route.replacement": "moved-$1"}
    timestamped = {"transforms": "day", "transforms.day.type": "org.apache.kafka.connect.transforms.TimestampRouter"}
    cloud = {"topics": "orders-eu,payments", "cps.project": "p", "cps.topic": "c-${topic}"}
    lite = {"topics": "orders-eu,payments", "pubsublite.project": "p", "pubsublite.location": "us-central1-a",
            "pubsublite.topic": "l-${topic}"}

    def drawn(plugin, keys: dict) -> set[str]:
        (tmp_path / "bridges.yaml").write_text(json.dumps({"bridges": [
            {"name": "b", "connector": plugin.name, "mode": "batch", "config": keys}]}))
        [bridge] = load_bridges(tmp_path / "bridges.yaml")
        return {"/".join(endpoint.key) for endpoint in plugin.writes(bridge)}

    assert drawn(CLOUD_SINK, {**cloud, **router}) == {"pubsub/p/topics/c-moved-eu", "pubsub/p/topics/c-payments"}
    assert drawn(CLOUD_SINK, {**cloud, **timestamped}) == set()  # where a record goes depends on its time
    assert {key.rsplit("/", 1)[1] for key in drawn(LITE_SINK, {**lite, **router})} == {"l-moved-eu", "l-payments"}
    assert drawn(LITE_SINK, {**lite, **timestamped}) == set()
