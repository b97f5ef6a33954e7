"""Kafka -> Kafka replication between the stack's two real clusters (`kafka` and `kafka_target`)."""

from __future__ import annotations

import os
import signal
import time

import pyarrow as pa
import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from dagster import DagsterInstance, materialize

from bridge_assets.definitions import build_definitions
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import KafkaConnection
from resources import default_resources
from tests.e2e.helpers import kafka_admin, materialize_bridge, mm2_checkpoints

pytestmark = pytest.mark.e2e


def _target() -> KafkaAdmin:
    return KafkaAdmin(KafkaConnection(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]))


def _read_target(topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], "group.id": "check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    for _ in range(200):
        records += [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
        if len(records) >= expected:
            break
    consumer.close()
    return records


def _bridges(tmp_path, name: str, keys: dict) -> str:
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "KafkaSinkConnector", "config": {
        "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], **keys}, "mode": "batch"}]}))
    return str(path)


def test_records_keep_key_headers_timestamp_and_partition_and_the_next_batch_moves_only_new_ones(
        stack, spark, tmp_path, unique):
    topic, name = f"repl-{unique}", f"repl_{unique}"
    kafka_admin().create_topic(topic, partitions=3)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    sent = {}
    an_hour_ago = int(time.time() * 1000) - 3_600_000  # older ones would be deleted by time retention
    for i in range(90):
        timestamp = an_hour_ago + i  # a CreateTime of its own, kept on the target
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3, timestamp=timestamp,
                         headers=[("trace", f"t{i}".encode()), ("empty", None)])
        sent[f"v{i}".encode()] = (f"k{i}".encode(), i % 3, timestamp)
    producer.produce(topic, key=b"tomb", value=None, partition=0)  # a tombstone is replicated as one
    assert producer.flush(30) == 0
    defs, instance = build_definitions(_bridges(tmp_path, name, {"topics": topic,
                                                                  "topic.rename.format": "backup.${topic}"})), \
        DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    assert metadata["records_published"].value == 91
    assert _target().partitions([f"backup.{topic}"]) == {f"backup.{topic}": [0, 1, 2]}  # created like the source
    replicated = _read_target(f"backup.{topic}", 3, 91)
    assert len(replicated) == 91
    by_value = {m.value(): m for m in replicated}
    for value, (key, partition, timestamp) in sent.items():
        message = by_value[value]
        assert (message.key(), message.partition(), message.timestamp()[1]) == (key, partition, timestamp)
        assert message.headers() == [("trace", b"t" + value[1:]), ("empty", None)]
    assert by_value[None].key() == b"tomb"
    # Within a partition, the source's order.
    for partition in range(3):
        values = [m.value() for m in replicated if m.partition() == partition and m.value() is not None]
        assert values == sorted(values, key=lambda v: int(v[1:]))

    producer.produce(topic, key=b"late", value=b"late", partition=1)
    assert producer.flush(30) == 0
    assert materialize_bridge(defs, name, instance)["records_published"].value == 1
    assert len(_read_target(f"backup.{topic}", 3, 92)) == 92


def test_a_regex_routes_each_topic_to_its_own_target(stack, spark, tmp_path, unique):
    topics = [f"route-{unique}-{n}" for n in ("a", "b")]
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=1)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for topic in topics:
        for i in range(5):
            producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    name = f"route_{unique}"
    defs = build_definitions(_bridges(tmp_path, name, {"topics.regex": f"route-{unique}-.*",
                                                       "topic.rename.format": "copy.${topic}"}))
    materialize_bridge(defs, name)
    for topic in topics:
        assert sorted(m.value() for m in _read_target(f"copy.{topic}", 1, 5)) == [
            f"{topic}-{i}".encode() for i in range(5)]


def test_a_target_with_fewer_partitions_gains_them_or_fails_in_one_line_before_anything_moves(
        stack, spark, tmp_path, unique):
    """target.partition=same into a target topic with fewer partitions than its source: by default the target gains
    them, as MirrorMaker 2 does, and a record keeps its partition; with target.topic.create=false the run fails
    naming both counts, and nothing moves."""
    topic, name = f"narrow-{unique}", f"narrow_{unique}"
    kafka_admin().create_topic(topic, partitions=3)
    _target().create_topic(topic, partitions=1)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    producer.produce(topic, value=b"x", partition=2)
    assert producer.flush(30) == 0

    defs = build_definitions(_bridges(tmp_path, name, {"topics": topic, "target.topic.create": "false"}))
    result = materialize([defs.get_assets_def(name)], resources=default_resources(),
                         instance=DagsterInstance.ephemeral(), raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_failure_data.user_failure_data.description.endswith(
        f"target topic {topic} has 1 partitions, source topic {topic} has 3: target.partition=same needs as many "
        "(or target.partition=key, or target.topic.create=true to add them)")
    assert _target().partitions([topic])[topic] == [0]

    defs = build_definitions(_bridges(tmp_path, name, {"topics": topic}))
    result = materialize([defs.get_assets_def(name)], resources=default_resources(),
                         instance=DagsterInstance.ephemeral(), raise_on_error=False)
    assert result.success
    assert _target().partitions([topic])[topic] == [0, 1, 2]
    assert [(m.partition(), m.value()) for m in _read_target(topic, 3, 1)] == [(2, b"x")]


def test_consumer_groups_fail_over_with_translated_offsets(stack, spark, tmp_path, unique):
    """A source group's committed offsets become MM2 checkpoints on the target and, with
    sync.group.offsets.enabled, the same group's offsets there: a consumer that moves to the target goes on
    with the record after the last one it had read."""
    topic, name, group = f"fail-{unique}", f"fail_{unique}", f"billing-{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    target_topic = f"dr.{topic}"
    _target().create_topic(target_topic, partitions=2)
    filler = Producer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], "log_level": 3})
    for _ in range(5):  # the target's offsets differ from the source's
        filler.produce(target_topic, value=b"older", partition=0)
    assert filler.flush(30) == 0
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(40):
        producer.produce(topic, value=f"r{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    source_consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": group,
                                "enable.auto.commit": False})
    source_consumer.commit(offsets=[TopicPartition(topic, 0, 12), TopicPartition(topic, 1, 20)], asynchronous=False)
    source_consumer.close()
    defs = build_definitions(_bridges(tmp_path, name, {
        "topics": topic, "topic.rename.format": "dr.${topic}", "source.cluster.alias": "primary",
        "sync.group.offsets.enabled": True}))

    metadata = materialize_bridge(defs, name)
    assert metadata["checkpoints_written"].value == 2
    checkpoints = mm2_checkpoints(_read_target("primary.checkpoints.internal", 1, 2))
    assert checkpoints == {(group, target_topic, 0): (0, 12, 17), (group, target_topic, 1): (0, 20, 20)}

    target_consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], "group.id": group,
                                "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    target_consumer.assign([TopicPartition(target_topic, 0)])  # committed offsets apply to assign() too
    first = None
    for _ in range(40):
        message = target_consumer.poll(0.5)
        if message is not None and message.error() is None:
            first = message
            break
    target_consumer.close()
    assert first is not None and first.value() == b"r24"  # partition 0 holds r0, r2, ...: offset 12 is r24


def test_a_chain_of_filter_insert_header_and_drop_headers_runs_before_the_target(stack, spark, tmp_path, unique):
    """Kafka Connect's column-wise transforms in the Kafka sink, as on a MirrorSourceConnector: the records a Filter
    drops (here the tombstones) are counted skipped and never replicated; the others keep their partition and order
    and arrive with the header the chain added and without the one it dropped."""
    topic, name = f"replt-{unique}", f"replt_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(40):
        producer.produce(topic, key=f"k{i}".encode(), value=None if i % 5 == 0 else f"v{i}".encode(), partition=i % 2,
                         headers=[("trace", f"t{i}".encode()), ("secret", b"s")])
    assert producer.flush(30) == 0
    t = "org.apache.kafka.connect.transforms."
    defs, instance = build_definitions(_bridges(tmp_path, name, {
        "topics": topic, "topic.rename.format": "backup.${topic}",
        "transforms": "notomb,tag,clean", "transforms.notomb.type": t + "Filter",
        "transforms.notomb.predicate": "istomb", "predicates": "istomb",
        "predicates.istomb.type": t + "predicates.RecordIsTombstone",
        "transforms.tag.type": t + "InsertHeader", "transforms.tag.header": "source",
        "transforms.tag.value.literal": "primary", "transforms.clean.type": t + "DropHeaders",
        "transforms.clean.headers": "secret"})), DagsterInstance.ephemeral()

    metadata = materialize_bridge(defs, name, instance)
    assert metadata["records_published"].value == 32 and metadata["records_skipped"].value == 8
    replicated = _read_target(f"backup.{topic}", 2, 32)
    assert sorted(m.key() for m in replicated) == sorted(f"k{i}".encode() for i in range(40) if i % 5)
    for message in replicated:
        i = int(message.key()[1:])
        assert (message.value(), message.partition()) == (f"v{i}".encode(), i % 2)
        assert message.headers() == [("trace", f"t{i}".encode()), ("source", b"primary")]
    for partition in range(2):
        keys = [int(m.key()[1:]) for m in replicated if m.partition() == partition]
        assert keys == sorted(keys)
    assert materialize_bridge(defs, name, instance)["records_published"].value == 0  # the position moved past all 40


@pytest.mark.parametrize("waiting_in", ["put", "flush"])
def test_a_writer_told_to_stop_purges_what_the_target_has_not_acknowledged(stack, unique, waiting_in):
    """A killed run's batch task (its lease lapsed) while its producer holds records the target has not taken: the
    writer purges librdkafka's queue and raises DeliveryAbandoned within a look, and once the target answers again
    nothing the writer held reaches it."""
    from connectors.config.common import ErrorHandlingKeys
    from connectors.errors import DeliveryAbandoned
    from connectors.kafka.range_reader import RECORD_SCHEMA_WITH_HEADERS
    from connectors.framework.sink_tally import SinkTally
    from connectors.kafka_sink.config import KafkaSinkConfig
    from connectors.kafka_sink.write import ReplicaTarget, ReplicaWriter

    topic, n, bootstrap = f"purge-{unique}", 2_000, os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
    _target().create_topic(topic, partitions=1)
    config = KafkaSinkConfig.model_validate({"topics": topic, "target.bootstrap.servers": bootstrap})
    records = pa.RecordBatch.from_pydict({
        "topic": [topic] * n, "partition": [0] * n, "offset": list(range(n)), "timestamp_ms": [0] * n,
        "timestampType": [-1] * n, "key": [None] * n, "value": [b"v" * 1_000] * n, "headers": [[]] * n,
    }, schema=RECORD_SCHEMA_WITH_HEADERS)
    target = ReplicaTarget(config, max_message_bytes=2_000_000, outage_timeout_s=30)
    tally = SinkTally("purge", ErrorHandlingKeys.model_validate({}), {})
    stop_at, told_at, put_returned = float("inf"), [], False

    def keep_going() -> bool:
        if time.monotonic() < stop_at:
            return True
        told_at.append(time.monotonic())
        return False

    # The target broker stopped (SIGSTOP) before the writer's producer learns where the topic lives: it holds every
    # record in its queue, however fast or slow the machine, until the broker answers again.
    broker = next(service.pid for service in stack.status() if service.name == "kafka_target")
    os.kill(broker, signal.SIGSTOP)
    try:
        with pytest.raises(DeliveryAbandoned, match="records not acknowledged"):
            with ReplicaWriter(target, tally) as writer:
                writer.keep_going = keep_going
                if waiting_in == "put":
                    stop_at = time.monotonic()  # seen at put's first look, after 1,000 records handed over
                writer.put(records)
                put_returned, stop_at = True, time.monotonic()
                writer.flush()
        raised_at = time.monotonic()
    finally:
        os.kill(broker, signal.SIGCONT)
    assert put_returned == (waiting_in == "flush")
    assert len(told_at) == 1  # one look saw the stop, and the writer asked no more
    if waiting_in == "flush":
        assert told_at[0] - stop_at < 0.5, told_at[0] - stop_at  # flush looks every KEEP_GOING_LOOK_S of its wait
    assert raised_at - told_at[0] < 0.5, raised_at - told_at[0]  # the purge does not wait for the queue to drain

    time.sleep(3.0)  # the writer's producer (alive in `writer`) would have sent what it held by now
    probe = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    probe.produce(topic, b"probe")
    assert probe.flush(10) == 0  # the target takes records again
    time.sleep(1.0)
    assert _target().end_offsets({topic: [0]})[topic][0] == 1  # the probe, and nothing the writer held
    del writer


@pytest.mark.parametrize("tolerance", ["all", "none"])
def test_records_the_target_refuses_after_they_were_sent_are_named_by_their_own_rows(stack, unique, tolerance):
    """Keyless records into a compacted target topic, which the broker refuses for good after they were sent,
    alike ones among them and a second partition beside: with errors.tolerance=all each refused record goes to the
    dead-letter topic under its own offset and the others count as published; with `none` the writer fails naming
    the first refused record."""
    from connectors.config.common import ErrorHandlingKeys
    from connectors.errors import RecordError
    from connectors.kafka.range_reader import RECORD_SCHEMA_WITH_HEADERS
    from connectors.framework.sink_tally import SinkTally
    from connectors.kafka_sink.config import KafkaSinkConfig
    from connectors.kafka_sink.write import ReplicaTarget, ReplicaWriter

    source, target_topic, dead_letters = f"src-{unique}", f"compacted-{unique}", f"dlq-{unique}"
    _target().create_topic(target_topic, partitions=2, config={"cleanup.policy": "compact"})
    config = KafkaSinkConfig.model_validate({"topics": source, "topic.rename.format": target_topic,
                                             "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]})
    places = [(0, 10, None, b"x"), (0, 11, None, b"x"), (0, 12, None, b"y"), (1, 20, b"k1", b"x"), (1, 21, b"k2", b"x")]
    records = pa.RecordBatch.from_pydict({
        "topic": [source] * len(places), "partition": [p for p, _, _, _ in places],
        "offset": [o for _, o, _, _ in places], "timestamp_ms": [0] * len(places),
        "timestampType": [-1] * len(places), "key": [k for _, _, k, _ in places],
        "value": [v for _, _, _, v in places], "headers": [[]] * len(places)}, schema=RECORD_SCHEMA_WITH_HEADERS)
    errors = ErrorHandlingKeys.model_validate({"errors.tolerance": tolerance, **(
        {"errors.deadletterqueue.topic.name": dead_letters, "errors.deadletterqueue.context.headers.enable": "true"}
        if tolerance == "all" else {})})
    tally = SinkTally("refused", errors, {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    writer = ReplicaWriter(ReplicaTarget(config, max_message_bytes=2_000_000, outage_timeout_s=30), tally)
    if tolerance == "none":
        with pytest.raises(RecordError, match=f"topic {source} partition 0 offset 10: the target Kafka refused it"):
            with writer:
                writer.put(records)
                writer.flush()
        return
    with writer:
        writer.put(records)
        writer.flush()
    counts = {row["partition"]: (row["published"], row["dead_lettered"]) for row in tally.summary()}
    assert counts == {0: (0, 3), 1: (2, 0)}
    assert sorted(m.key() for m in _read_target(target_topic, 2, 2)) == [b"k1", b"k2"]
    dead = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "check",
                     "enable.auto.commit": False})
    dead.assign([TopicPartition(dead_letters, 0, 0)])
    letters = [m for m in dead.consume(10, timeout=10) if m.error() is None]
    dead.close()
    assert sorted(dict(m.headers())["__connect.errors.offset"] for m in letters) == [b"10", b"11", b"12"]
