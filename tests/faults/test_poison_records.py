"""Poison records under both tolerances, for the connectors whose end-to-end tests do not have them
(the Cloud Pub/Sub sink's are in tests/e2e/test_cloud_pubsub_sink_failures.py):

- errors.tolerance=none: the run fails with a line naming the record, records nothing, and moves
  nothing past it;
- errors.tolerance=all: the poison record is dead-lettered (sinks) or counted and skipped (sources),
  and every good record around it is delivered once.
"""

from __future__ import annotations

import os

import pytest
import yaml
from confluent_kafka import Producer
from dagster import AssetKey, DagsterInstance, materialize
from google.cloud import pubsub_v1

from asset_metadata import recorded_position
from bridge_assets.definitions import build_definitions
from connectors.framework.plugin_parts import KAFKA_OFFSETS
from connectors.pubsublite_source.plugin import LITE_CURSORS
from resources import default_resources
from tests.e2e.helpers import PROJECT, create_pubsub_topic, kafka_admin
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, publish_lite, read_whole_lite_topic
from tests.e2e.test_cloud_pubsub_sink_failures import _read_topic
from tests.e2e.test_pubsublite_source_e2e import read_kafka

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
JSON_VALUES = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
               "value.converter.schemas.enable": False}
OVER_A_MEGABYTE = 1_500_000  # over Kafka's default 1 MB record limit
OVER_LITE_LIMIT = 4_000_000  # over Pub/Sub Lite's 3.5 MB message limit


def _run(defs, name: str, instance: DagsterInstance):
    return materialize([defs.get_assets_def(name)], resources=default_resources(), instance=instance,
                       raise_on_error=False)


def _failure(result) -> str:
    assert not result.success
    return next(e for e in result.all_events if e.is_step_failure).step_failure_data.error.message


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_lite_sink_poison_records(stack, spark, tmp_path, unique, tolerance):
    topic, dlq, name = f"lite-poison-{unique}", f"lite-poison-dlq-{unique}", f"lite_poison_{unique}"
    kafka_admin().create_topic(topic, partitions=1, config={"max.message.bytes": str(6 * 1024 * 1024)})
    lite_topic, subscription = create_lite_topic(topic, partitions=1)
    keys = {"topics": topic, "pubsublite.topic": topic, **JSON_VALUES, "errors.tolerance": tolerance}
    if tolerance == "all":
        keys["errors.deadletterqueue.topic.name"] = dlq
    defs = build_definitions(lite_bridges_file(tmp_path, name, "PubSubLiteSinkConnector", keys))
    oversized = b'"' + b"x" * OVER_LITE_LIMIT + b'"'  # valid JSON, too large for Lite
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3,
                         "message.max.bytes": 6 * 1024 * 1024})
    for value in (b'"good-1"', b"{malformed", b'"good-2"', oversized, b'"good-3"'):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    instance = DagsterInstance.ephemeral()

    result = _run(defs, name, instance)
    delivered = [m.message.data for m in read_whole_lite_topic(lite_topic, subscription, 1)]
    if tolerance == "none":
        assert f"topic {topic} partition 0 offset 1" in _failure(result)
        assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {}
        assert b"good-3" not in delivered  # nothing past the poison record is acknowledged as moved
        return
    assert result.success
    assert sorted(delivered) == [b"good-1", b"good-2", b"good-3"]
    metadata = result.asset_materializations_for_node(name)[0].metadata
    assert metadata["records_dead_lettered"].value == 2
    assert sorted(len(m.value()) for m in _read_topic(dlq, 2)) == [len(b"{malformed"), len(oversized)]


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_cloud_source_message_kafka_cannot_take(stack, spark, tmp_path, unique, tolerance):
    name, kafka_topic = f"ps_poison_{unique}", f"ps-poison-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    subscription = create_pubsub_topic(kafka_topic)
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "CloudPubSubSourceConnector", "mode": "batch", "batch": {"parallelism": 1},
        "config": {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
                   "kafka.topic": kafka_topic, "errors.tolerance": tolerance}}]}))
    publisher = pubsub_v1.PublisherClient()
    topic_path = publisher.topic_path(PROJECT, kafka_topic)
    ids = [publisher.publish(topic_path, data).result()
           for data in (b"good-1", b"x" * OVER_A_MEGABYTE, b"good-2")]
    defs = build_definitions(str(path))

    result = _run(defs, name, DagsterInstance.ephemeral())
    if tolerance == "none":
        failure = _failure(result)
        assert f"message {ids[1]} (" in failure and "too large" in failure.lower()
        return
    assert result.success
    assert sorted(r.value() for r in read_kafka(kafka_topic)) == [b"good-1", b"good-2"]
    metadata = result.asset_materializations_for_node(name)[0].metadata
    assert metadata["messages_dropped"].value == 1
    # Dropped messages are acked: the next run finds nothing, so the bridge is not stuck on it.
    assert _run(defs, name, DagsterInstance.ephemeral()).asset_materializations_for_node(name)[0] \
        .metadata["messages_pulled"].value == 0


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_lite_source_message_kafka_cannot_take(stack, spark, tmp_path, unique, tolerance):
    name, kafka_topic = f"lite_src_poison_{unique}", f"lite-src-poison-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    topic, subscription = create_lite_topic(f"lite-src-poison-{unique}", partitions=1)
    publish_lite(topic, [{"data": b"good-1"}, {"data": b"x" * OVER_A_MEGABYTE}, {"data": b"good-2"}])
    defs = build_definitions(lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", {
        "pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic, "errors.tolerance": tolerance}))
    instance = DagsterInstance.ephemeral()

    result = _run(defs, name, instance)
    if tolerance == "none":
        assert "Lite partition 0 offset 1" in _failure(result)
        assert recorded_position(instance, AssetKey(name), LITE_CURSORS) == {}
        return
    assert result.success
    assert sorted(r.value() for r in read_kafka(kafka_topic)) == [b"good-1", b"good-2"]
    metadata = result.asset_materializations_for_node(name)[0].metadata
    assert metadata["messages_dropped"].value == 1 and metadata["messages_written"].value == 2
    assert recorded_position(instance, AssetKey(name), LITE_CURSORS) == {0: 3}


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_s3_archive_value_that_cannot_be_a_line(stack, spark, tmp_path, unique, tolerance):
    import boto3

    from connectors.s3_block_gzip_sink.reader import read_from_offset
    from tests.e2e.helpers import produce

    topic, dlq, name, bucket = f"s3-poison-{unique}", f"s3-poison-dlq-{unique}", f"s3_poison_{unique}", \
        f"s3-poison-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket=bucket)
    config = {"topics": topic, "s3.bucket": bucket, "s3.prefix": "p", "s3.path_style": True, **JSON_VALUES,
              "errors.tolerance": tolerance}
    if tolerance == "all":
        config["errors.deadletterqueue.topic.name"] = dlq
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "S3BlockGzipSinkConnector", "mode": "batch",
                                                 "config": config}]}))
    produce(topic, [("k1", '"line-1"'), ("k2", "{malformed"), ("k3", '"line-3"')])
    defs = build_definitions(str(path))

    result = _run(defs, name, DagsterInstance.ephemeral())
    if tolerance == "none":
        assert f"topic {topic} partition 0 offset 1" in _failure(result)
        assert list(read_from_offset(s3, bucket, "p", topic, 0, 0)) == []
        return
    assert result.success
    assert list(read_from_offset(s3, bucket, "p", topic, 0, 0)) == [(0, b"line-1"), (2, b"line-3")]
    assert result.asset_materializations_for_node(name)[0].metadata["records_skipped"].value == 1
    [dead] = _read_topic(dlq, 1)
    assert (dead.key(), dead.value()) == (b"k2", b"{malformed")
