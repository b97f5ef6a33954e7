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
