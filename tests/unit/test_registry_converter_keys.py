"""Confluent's registry converter keys in a bridge's config: loading, errors, secrets, the wire format."""

import textwrap

import pytest

from connectors.bridges_file import BridgeConfigError, load_bridges
from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.registry.settings import RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY
from connectors.kafka_connect.registry.wire import (
    header, message_indexes, split_header, split_message_indexes, subject_name,
)


def _load(tmp_path, properties: str):
    (tmp_path / "avro.properties").write_text(textwrap.dedent(properties))
    (tmp_path / "bridges.yaml").write_text("bridges:\n  - name: avro\n    properties: avro.properties\n")
    return load_bridges(tmp_path / "bridges.yaml")


PROPERTIES = """
    name=avro-orders
    connector.class=com.google.pubsub.kafka.sink.CloudPubSubSinkConnector
    tasks.max=2
    topics=orders
    cps.project=p
    cps.topic=orders
    key.converter=org.apache.kafka.connect.storage.StringConverter
    value.converter=io.confluent.connect.avro.AvroConverter
    value.converter.schema.registry.url=http://a:8081,http://b:8081
    value.converter.basic.auth.credentials.source=USER_INFO
    value.converter.basic.auth.user.info=svc:hunter2
    value.converter.auto.register.schemas=false
    value.converter.value.subject.name.strategy=io.confluent.kafka.serializers.subject.RecordNameStrategy
    value.converter.enhanced.avro.schema.support=true
"""


def test_an_unchanged_avro_connector_properties_file_loads(tmp_path):
    [bridge] = _load(tmp_path, PROPERTIES)
    converter = bridge.config.value_converter_instance()
    assert type(converter).__name__ == "AvroConverter"
    settings = converter.settings
    assert settings.urls == ("http://a:8081", "http://b:8081") and not settings.auto_register_schemas
    assert settings.subject_name_strategy == RECORD_NAME_STRATEGY and not settings.is_key
    assert "value.converter.basic.auth.user.info" in bridge.config.secret_keys()
    assert "hunter2" not in repr(settings) and "hunter2" not in repr(bridge.config)


def test_registry_converter_problems_are_named_and_secrets_never_shown(tmp_path):
    url_line = "value.converter.schema.registry.url=http://a:8081,http://b:8081"
    cases = [
        (PROPERTIES.replace(url_line, ""), "needs value.converter.schema.registry.url"),
        (PROPERTIES.replace(url_line, "value.converter.schema.registry.url=ftp://a"),
         "'ftp://a' is not an http:// or https:// URL"),
        (PROPERTIES + "value.converter.schema.registry.urls=http://a\n",
         "key 'value.converter.schema.registry.urls': unknown key (did you mean 'value.converter.schema.registry.url'?)"),
        (PROPERTIES.replace("value.converter.basic.auth.user.info=svc:hunter2", ""),
         "USER_INFO needs value.converter.basic.auth.user.info"),
        (PROPERTIES.replace("auto.register.schemas=false", "auto.register.schemas=maybe"),
         "key 'value.converter.auto.register.schemas'"),
    ]
    for text, expected in cases:
        with pytest.raises(BridgeConfigError) as err:
            _load(tmp_path, text)
        assert expected in str(err.value) and "hunter2" not in str(err.value)


def test_wire_format_header_and_protobuf_message_indexes():
    assert split_header(header(258) + b"rest")[0] == 258
    assert bytes(split_header(header(1) + b"rest")[1]) == b"rest"
    with pytest.raises(ConversionError, match="magic byte"):
        split_header(b"\x01\x00\x00\x00\x01")
    with pytest.raises(ConversionError, match="first byte is nothing"):
        split_header(b"")
    for indexes in ([0], [1], [0, 2], [3, 1, 4]):
        encoded = message_indexes(indexes) + b"msg"
        assert split_message_indexes(memoryview(encoded)) == (indexes, memoryview(b"msg"))


def test_subject_name_strategies(tmp_path):
    [bridge] = _load(tmp_path, PROPERTIES)
    settings = bridge.config.value_converter_instance().settings
    assert subject_name(settings, "orders", "shop.Order") == "shop.Order"
    from dataclasses import replace

    assert subject_name(replace(settings, subject_name_strategy=TOPIC_RECORD_NAME_STRATEGY), "orders",
                        "shop.Order") == "orders-shop.Order"
    with pytest.raises(ConversionError, match="RecordNameStrategy needs a named record schema"):
        subject_name(settings, "orders", None)


def test_a_schema_id_the_registry_cannot_give_is_asked_for_once_per_task(tmp_path, monkeypatch):
    from connectors.kafka_connect.registry.converters import AvroConverter

    asked = []

    class RegistryDown:
        def get_schema(self, schema_id):
            asked.append(schema_id)
            raise ConnectionError("connection refused")

    monkeypatch.setattr(AvroConverter, "client", property(lambda self: RegistryDown()))
    [bridge] = _load(tmp_path, PROPERTIES)
    converter = bridge.config.value_converter_instance()
    for _ in range(3):
        with pytest.raises(ConversionError, match="schema id 7: Schema Registry: fetching schema id 7 failed: "
                                                  "connection refused"):
            converter.to_connect(header(7) + b"\x02")
    assert asked == [7]
