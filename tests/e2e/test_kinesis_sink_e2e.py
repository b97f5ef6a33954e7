"""Kafka -> Kinesis Data Streams against the real local Kafka and moto's Kinesis (the stack's moto server)."""

from __future__ import annotations

import os

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from dagster import AssetKey, DagsterInstance, materialize

from bridge_assets.definitions import build_definitions
from resources import default_resources
from tests.e2e.helpers import (
    create_kinesis_stream, kafka_admin, kinesis_records_by_shard, materialize_bridge, produce,
)

pytestmark = pytest.mark.e2e


def _bridges(tmp_path, name: str, topic: str, stream: str, keys: dict | None = None) -> str:
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "KinesisSinkConnector", "config": {
        "topics": topic, "kinesis.stream.name": stream, **(keys or {})}, "mode": "batch"}]}))
    return str(path)


def test_records_arrive_keyed_and_the_next_batch_moves_only_new_ones(stack, spark, tmp_path, unique):
    topic, stream, name = f"kin-{unique}", f"kin-{unique}", f"kin_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    create_kinesis_stream(stream, shards=2)
    produce(topic, [(f"key-{i % 7}", f"value-{i}") for i in range(300)] + [(None, "no key")])
    defs, instance = build_definitions(_bridges(tmp_path, name, topic, stream)), DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    records = [r for shard in kinesis_records_by_shard(stream).values() for r in shard]
    assert metadata["records_published"].value == 301 and len(records) == 301
    assert {(r["PartitionKey"], r["Data"]) for r in records} >= {(f"key-{i % 7}", f"value-{i}".encode())
                                                                  for i in range(300)}
    [unkeyed] = [r for r in records if r["Data"] == b"no key"]
    assert unkeyed["PartitionKey"] in ("0", "1")  # a null key: the Kafka partition number
    # A key's records share a shard (Kinesis hashes the partition key).
    shards_of = {}
    for shard, shard_records in kinesis_records_by_shard(stream).items():
        for r in shard_records:
            shards_of.setdefault(r["PartitionKey"], set()).add(shard)
    assert all(len(shards) == 1 for shards in shards_of.values())

    produce(topic, [("late", "value-late")])
    assert materialize_bridge(defs, name, instance)["records_published"].value == 1
    assert sum(len(s) for s in kinesis_records_by_shard(stream).values()) == 302


def test_partition_mode_puts_each_kafka_partition_into_one_shard(stack, spark, tmp_path, unique):
    topic, stream, name = f"kinp-{unique}", f"kinp-{unique}", f"kinp_{unique}"
    kafka_admin().create_topic(topic, partitions=4)
    create_kinesis_stream(stream, shards=2)
    produce(topic, [(f"k{i}", f"{i}") for i in range(200)])
    defs = build_definitions(_bridges(tmp_path, name, topic, stream, {"kinesis.partition.key": "partition"}))

    materialize_bridge(defs, name)
    shards_of: dict[str, set[str]] = {}
    for shard, records in kinesis_records_by_shard(stream).items():
        for r in records:
            shards_of.setdefault(r["PartitionKey"], set()).add(shard)
    assert set(shards_of) == {"0", "1", "2", "3"} and all(len(s) == 1 for s in shards_of.values())
    assert len({next(iter(s)) for s in shards_of.values()}) == 2  # the four partitions spread over both shards


def test_a_record_over_kinesis_limit_is_dead_lettered_and_the_rest_move(stack, spark, tmp_path, unique):
    topic, dlq, stream, name = f"kinbig-{unique}", f"kinbig-dlq-{unique}", f"kinbig-{unique}", f"kinbig_{unique}"
    kafka_admin().create_topic(topic, partitions=1, config={"max.message.bytes": str(3 * 1024 * 1024)})
    create_kinesis_stream(stream, shards=1)
    big = b"x" * (1024 * 1024 + 1)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3,
                         "message.max.bytes": 4 * 1024 * 1024})
    for value in (b"before", big, b"after"):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    defs = build_definitions(_bridges(tmp_path, name, topic, stream, {
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}))

    metadata = materialize_bridge(defs, name)
    assert sorted(r["Data"] for r in kinesis_records_by_shard(stream)[next(iter(kinesis_records_by_shard(stream)))]) == [
        b"after", b"before"]
    assert metadata["records_dead_lettered"].value == 1
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": f"check-{unique}",
                         "fetch.max.bytes": 8 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024})
    consumer.assign([TopicPartition(dlq, 0, 0)])
    message = consumer.poll(30)
    consumer.close()
    assert message is not None and message.value() == big


def test_a_stream_that_does_not_exist_fails_in_one_line_and_records_nothing(stack, spark, tmp_path, unique):
    topic, name = f"kinnone-{unique}", f"kinnone_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    produce(topic, [(None, "x")])
    defs = build_definitions(_bridges(tmp_path, name, topic, f"nosuch-{unique}"))
    result = materialize([defs.get_assets_def(name)], resources=default_resources(),
                         instance=DagsterInstance.ephemeral(), raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(f"bridge {name} (") and f"Kinesis stream nosuch-{unique} (us-east-1): " \
        "ResourceNotFoundException" in description


def test_topic_routing_sends_each_kafka_topic_to_its_own_stream(stack, spark, tmp_path, unique):
    topics = [f"kinr-{unique}-{n}" for n in ("a", "b")]
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=1)
        create_kinesis_stream(f"s-{topic}", shards=1)
        produce(topic, [(None, f"{topic}-{i}") for i in range(10)])
    name = f"kinr_{unique}"
    defs = build_definitions(_bridges(tmp_path, name, ",".join(topics), "s-${topic}"))

    assert materialize_bridge(defs, name)["records_published"].value == 20
    for topic in topics:
        [records] = kinesis_records_by_shard(f"s-{topic}").values()
        assert sorted(r["Data"].decode() for r in records) == sorted(f"{topic}-{i}" for i in range(10))


def test_a_filter_on_the_topic_name_runs_before_kinesis(stack, spark, tmp_path, unique):
    """Kafka Connect's Filter with a predicate in a sink without converters: the records of the topic it matches are
    counted skipped and never put; the other topic's arrive."""
    kept, dropped, stream, name = f"kinf-{unique}", f"kinf-debug-{unique}", f"kinf-{unique}", f"kinf_{unique}"
    for topic in (kept, dropped):
        kafka_admin().create_topic(topic, partitions=1)
        produce(topic, [(f"k{i}", f"{topic}-{i}") for i in range(10)])
    create_kinesis_stream(stream, shards=1)
    t = "org.apache.kafka.connect.transforms."
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "KinesisSinkConnector", "mode": "batch",
                                                 "config": {
        "topics": f"{kept},{dropped}", "kinesis.stream.name": stream, "transforms": "nodebug",
        "transforms.nodebug.type": t + "Filter", "transforms.nodebug.predicate": "isdebug", "predicates": "isdebug",
        "predicates.isdebug.type": t + "predicates.TopicNameMatches", "predicates.isdebug.pattern": ".*-debug-.*"}}]}))
    defs, instance = build_definitions(str(path)), DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    assert metadata["records_published"].value == 10 and metadata["records_skipped"].value == 10
    records = [r for shard in kinesis_records_by_shard(stream).values() for r in shard]
    assert sorted(r["Data"] for r in records) == sorted(f"{kept}-{i}".encode() for i in range(10))


def test_a_router_sends_each_record_to_the_stream_of_its_new_topic(stack, spark, tmp_path, unique):
    """RegexRouter before `kinesis.stream.name=s-${topic}`, as a Kafka Connect worker hands a sink task the routed
    record: two source topics merge into one stream; a third, routed only under a predicate (so the driver cannot
    know its stream), goes to the stream its records name, looked up by the task; the positions stay the sources'."""
    merged = [f"kinrx-{unique}-eu", f"kinrx-{unique}-us"]
    audit = f"kinrx-{unique}-audit"
    for topic in (*merged, audit):
        kafka_admin().create_topic(topic, partitions=1)
        produce(topic, [(None, f"{topic}-{i}") for i in range(10)])
    create_kinesis_stream(f"s-orders-{unique}", shards=1)
    create_kinesis_stream(f"s-audit-{unique}", shards=1)
    smt = "org.apache.kafka.connect.transforms."
    name = f"kinrx_{unique}"
    defs = build_definitions(_bridges(tmp_path, name, ",".join((*merged, audit)), "s-${topic}", {
        "transforms": "merge,audit", "transforms.merge.type": smt + "RegexRouter",
        "transforms.merge.regex": r"kinrx-(\w+)-(eu|us)", "transforms.merge.replacement": "orders-$1",
        "transforms.audit.type": smt + "RegexRouter", "transforms.audit.regex": r"kinrx-(\w+)-audit",
        "transforms.audit.replacement": "audit-$1", "transforms.audit.predicate": "isaudit",
        "predicates": "isaudit", "predicates.isaudit.type": smt + "predicates.TopicNameMatches",
        "predicates.isaudit.pattern": ".*-audit"}))
    instance = DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    assert metadata["records_published"].value == 30
    [orders] = kinesis_records_by_shard(f"s-orders-{unique}").values()
    assert sorted(r["Data"].decode() for r in orders) == sorted(f"{topic}-{i}" for topic in merged for i in range(10))
    [audited] = kinesis_records_by_shard(f"s-audit-{unique}").values()
    assert sorted(r["Data"].decode() for r in audited) == sorted(f"{audit}-{i}" for i in range(10))
    assert metadata["kafka_offsets"].value == {topic: {"0": 10} for topic in (*merged, audit)}


def test_a_stream_a_routed_record_names_that_does_not_exist_fails_in_one_line(stack, spark, tmp_path, unique):
    """A router under a predicate names a stream only the records decide, so the task looks it up when its first
    record goes there: a stream that does not exist fails the run in one line naming it, and nothing is recorded."""
    topic, name = f"kinrxnone-{unique}", f"kinrxnone_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    produce(topic, [(None, "x")])
    smt = "org.apache.kafka.connect.transforms."
    defs = build_definitions(_bridges(tmp_path, name, topic, "s-${topic}", {
        "transforms": "route", "transforms.route.type": smt + "RegexRouter", "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "gone-$1", "transforms.route.predicate": "any", "predicates": "any",
        "predicates.any.type": smt + "predicates.TopicNameMatches", "predicates.any.pattern": ".*"}))
    instance = DagsterInstance.ephemeral()
    result = materialize([defs.get_assets_def(name)], resources=default_resources(), instance=instance,
                         raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(f"bridge {name} (") and "\n" not in description
    assert f"Kinesis stream s-gone-{topic} (us-east-1): ResourceNotFoundException" in description
    assert instance.get_latest_materialization_event(AssetKey(name)) is None
