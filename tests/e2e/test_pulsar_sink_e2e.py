"""Kafka -> Apache Pulsar against the real local Kafka and the stack's Pulsar standalone."""

from __future__ import annotations

import logging
import os
import time

import pulsar
import pytest
import yaml
from confluent_kafka import Producer
from dagster import DagsterInstance

from bridge_assets.definitions import build_definitions
from tests.e2e.helpers import kafka_admin, materialize_bridge

pytestmark = pytest.mark.e2e


def _receive_all(topic: str, expected: int) -> list:
    logger = logging.getLogger("test-pulsar")
    logger.setLevel(logging.WARNING)
    client = pulsar.Client(os.environ["PULSAR_SERVICE_URL"], logger=logger)
    consumer = client.subscribe(topic, f"check-{time.monotonic_ns()}",
                                initial_position=pulsar.InitialPosition.Earliest)
    messages = []
    try:
        while len(messages) < expected:
            messages.append(consumer.receive(timeout_millis=20_000))
        try:  # nothing more than expected
            messages.append(consumer.receive(timeout_millis=1_000))
        except pulsar.Timeout:
            pass
    finally:
        client.close()
    return messages


def test_records_arrive_with_key_properties_and_event_time_each_topic_routed_and_resumed(
        stack, spark, tmp_path, unique):
    topics = [f"pls-{unique}-{n}" for n in ("a", "b")]
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=2)
        for i in range(25):
            producer.produce(topic, key=f"k{i}".encode(), value=f"{topic}-{i}".encode(), timestamp=an_hour_ago + i,
                             headers=[("trace", f"t{i}".encode())])
    producer.produce(topics[0], key=b"gone", value=None)  # a tombstone: skipped
    assert producer.flush(30) == 0
    path = tmp_path / "bridges.yaml"
    name = f"pls_{unique}"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "PulsarSinkConnector", "config": {
        "topics": ",".join(topics), "pulsar.service.url": os.environ["PULSAR_SERVICE_URL"]}, "mode": "batch"}]}))
    defs, instance = build_definitions(str(path)), DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    assert metadata["records_published"].value == 50 and metadata["records_skipped"].value == 1
    for topic in topics:
        messages = _receive_all(f"persistent://public/default/{topic}", 25)
        assert len(messages) == 25
        by_key = {m.partition_key(): m for m in messages}
        for i in range(25):
            message = by_key[f"k{i}"]
            assert message.data() == f"{topic}-{i}".encode()
            assert message.properties() == {"trace": f"t{i}"} and message.event_timestamp() == an_hour_ago + i

    producer.produce(topics[1], key=b"late", value=b"late")
    assert producer.flush(30) == 0
    assert materialize_bridge(defs, name, instance)["records_published"].value == 1
    assert len(_receive_all(f"persistent://public/default/{topics[1]}", 26)) == 26


def test_a_chain_of_filter_insert_header_and_drop_headers_runs_before_pulsar(stack, spark, tmp_path, unique):
    """Kafka Connect's column-wise transforms in a sink without converters: the records a Filter drops (here those
    with a `debug` header) are counted skipped and never sent; the others arrive with the header the chain added and
    without the one it dropped."""
    topic = f"plt-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(20):
        headers = [("trace", f"t{i}".encode()), ("secret", b"s")] + ([("debug", b"1")] if i % 4 == 0 else [])
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=headers)
    assert producer.flush(30) == 0
    t = "org.apache.kafka.connect.transforms."
    path = tmp_path / "bridges.yaml"
    name = f"plt_{unique}"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "PulsarSinkConnector", "mode": "batch",
                                                 "config": {
        "topics": topic, "pulsar.service.url": os.environ["PULSAR_SERVICE_URL"],
        "transforms": "nodebug,tag,clean", "transforms.nodebug.type": t + "Filter",
        "transforms.nodebug.predicate": "isdebug", "predicates": "isdebug",
        "predicates.isdebug.type": t + "predicates.HasHeaderKey", "predicates.isdebug.name": "debug",
        "transforms.tag.type": t + "InsertHeader", "transforms.tag.header": "source",
        "transforms.tag.value.literal": "kafka", "transforms.clean.type": t + "DropHeaders",
        "transforms.clean.headers": "secret"}}]}))
    defs, instance = build_definitions(str(path)), DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    assert metadata["records_published"].value == 15 and metadata["records_skipped"].value == 5
    messages = _receive_all(f"persistent://public/default/{topic}", 15)
    assert sorted(m.partition_key() for m in messages) == sorted(f"k{i}" for i in range(20) if i % 4)
    assert all(m.properties() == {"trace": f"t{m.partition_key()[1:]}", "source": "kafka"} for m in messages)


def test_a_router_sends_each_record_to_the_pulsar_topic_of_its_new_topic(stack, spark, tmp_path, unique):
    """RegexRouter before the default `pulsar.topic` (persistent://public/default/${topic}), as a Kafka Connect
    worker hands a sink task the routed record: each region's topic lands in one Pulsar topic per region without its
    prefix, and the next batch resumes from the source topics' positions."""
    topics = [f"plr-{unique}-{n}" for n in ("eu", "us")]
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=2)
        for i in range(10):
            producer.produce(topic, key=f"k{i}".encode(), value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    path = tmp_path / "bridges.yaml"
    name = f"plr_{unique}"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "PulsarSinkConnector", "mode": "batch",
                                                 "config": {
        "topics": ",".join(topics), "pulsar.service.url": os.environ["PULSAR_SERVICE_URL"], "transforms": "region",
        "transforms.region.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.region.regex": f"plr-{unique}-(.*)", "transforms.region.replacement": f"orders-$1-{unique}"}}]}))
    defs, instance = build_definitions(str(path)), DagsterInstance.ephemeral()

    assert materialize_bridge(defs, name, instance)["records_published"].value == 20
    for topic, region in zip(topics, ("eu", "us")):
        messages = _receive_all(f"persistent://public/default/orders-{region}-{unique}", 10)
        assert sorted(m.data() for m in messages) == sorted(f"{topic}-{i}".encode() for i in range(10))

    producer.produce(topics[1], key=b"late", value=b"late")
    assert producer.flush(30) == 0
    assert materialize_bridge(defs, name, instance)["records_published"].value == 1
    assert len(_receive_all(f"persistent://public/default/orders-us-{unique}", 11)) == 11


def test_a_timestamp_router_sends_each_record_to_the_pulsar_topic_of_its_hour(stack, spark, tmp_path, unique):
    """TimestampRouter before the default `pulsar.topic`: records of the last three hours land in one Pulsar topic per
    hour (`${topic}-yyyyMMddHH`, UTC), as Kafka Connect names them."""
    topic = f"ptr-{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    hour_ms = 3_600_000
    now_ms = int(time.time() * 1000)
    hours = [now_ms // hour_ms * hour_ms - back * hour_ms for back in (2, 1, 0)]  # recent: within time retention
    for i in range(12):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp=hours[i % 3] + i)
    assert producer.flush(30) == 0
    path = tmp_path / "bridges.yaml"
    name = f"ptr_{unique}"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "PulsarSinkConnector", "mode": "batch",
                                                 "config": {
        "topics": topic, "pulsar.service.url": os.environ["PULSAR_SERVICE_URL"], "transforms": "hourly",
        "transforms.hourly.type": "TimestampRouter", "transforms.hourly.timestamp.format": "yyyyMMddHH"}}]}))
    defs, instance = build_definitions(str(path)), DagsterInstance.ephemeral()

    assert materialize_bridge(defs, name, instance)["records_published"].value == 12
    for h, start in enumerate(hours):
        stamp = time.strftime("%Y%m%d%H", time.gmtime(start / 1000))
        messages = _receive_all(f"persistent://public/default/{topic}-{stamp}", 4)
        assert sorted(m.data() for m in messages) == sorted(f"v{i}".encode() for i in range(12) if i % 3 == h)
