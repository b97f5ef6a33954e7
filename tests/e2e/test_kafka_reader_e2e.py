"""The Kafka reader in the Spark task (connectors/kafka/range_reader.py) on logs that are not a plain run of
offsets: a compacted topic, transactions (aborted records, markers, an open transaction) under both isolation
levels, and a broker that takes SASL PLAIN. Every record the log still serves arrives once, and the recorded
position is the partition's end."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from dagster import AssetKey, DagsterInstance, materialize

from asset_metadata import recorded_position
from bridge_assets.definitions import build_definitions
from connectors.framework.plugin_parts import KAFKA_OFFSETS
from resources import KafkaResource, default_resources
from tests.e2e.helpers import create_pubsub_topic, drain, kafka_admin, produce, sink_bridges_file

pytestmark = pytest.mark.e2e


def _materialize_until_caught_up(defs, name: str, instance: DagsterInstance, resources=None, runs: int = 10) -> list:
    """Runs of the bridge until nothing is left to read; the metadata of each."""
    batches = []
    for _ in range(runs):
        result = materialize([defs.get_assets_def(name)], resources=resources or default_resources(),
                             instance=instance)
        assert result.success
        metadata = result.asset_materializations_for_node(name)[0].metadata
        batches.append(metadata)
        if metadata["lag_remaining"].value == 0:
            return batches
    raise AssertionError(f"still lagging after {runs} runs")


def _values_served(topic: str, isolation_level: str) -> list[str]:
    """What a plain consumer of partition 0 is served now, in order."""
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "test-probe",
                         "enable.auto.commit": False, "isolation.level": isolation_level,
                         "enable.partition.eof": True, "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of partition within 10 s"
            if message.error():
                return values
            values.append(message.value().decode())
    finally:
        consumer.close()


def test_a_compacted_topic_with_a_range_that_holds_no_record_left(stack, spark, tmp_path, unique):
    topic, name = f"compacted-{unique}", f"compacted_{unique}"
    kafka_admin().create_topic(topic, partitions=1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "100"})
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(100):  # ten keys, each written ten times: offsets 0-89 become garbage
        producer.produce(topic, key=f"k{i % 10}", value=f"v{i}")
    producer.flush(30)
    time.sleep(0.3)
    producer.produce(topic, key="tail", value="tail")  # rolls the segment, so the cleaner may compact it
    producer.flush(30)
    deadline = time.monotonic() + 60
    while len(served := _values_served(topic, "read_uncommitted")) > 11:
        assert time.monotonic() < deadline, f"the broker did not compact {topic} within 60 s"
        time.sleep(1)
    assert served == [f"v{i}" for i in range(90, 100)] + ["tail"]

    subscription = create_pubsub_topic(topic)
    # 30 records per batch: the first range, offsets 0-29, holds nothing any more; it must end at once.
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch={
        "max_records": 30, "initial_offsets": "earliest", "outage_timeout_seconds": 5}))
    instance = DagsterInstance.ephemeral()
    batches = _materialize_until_caught_up(defs, name, instance)

    assert [b["records_read"].value for b in batches][0] == 0
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(served)
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {topic: {0: 101}}


def _transactions(topic: str, tag: str) -> Producer:
    """Committed, aborted, committed; then one transaction left open (records past the last stable offset)."""
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3,
                         "transactional.id": f"test-{tag}"})
    producer.init_transactions(30)
    for label, commit in (("c1", True), ("a", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, value=f"{label}-{i}", partition=0)
        producer.flush(30)  # an abort drops what is still queued: these must be in the log first
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"open-{i}", partition=0)
    producer.flush(30)
    return producer


@pytest.mark.parametrize("isolation_level", ["read_committed", "read_uncommitted"])
def test_transactions_under_each_isolation_level(stack, spark, tmp_path, unique, isolation_level):
    topic, name = f"txn-{unique}", f"txn_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    open_transaction = _transactions(topic, unique)
    defs = build_definitions(sink_bridges_file(
        tmp_path, name, topic, keys={"consumer.override.isolation.level": isolation_level},
        batch={"initial_offsets": "earliest", "outage_timeout_seconds": 5}))
    instance = DagsterInstance.ephemeral()
    committed = [f"c1-{i}" for i in range(50)] + [f"c2-{i}" for i in range(50)]

    _materialize_until_caught_up(defs, name, instance)
    delivered = [m.data.decode() for m in drain(subscription)]
    offsets = recorded_position(instance, AssetKey(name), KAFKA_OFFSETS)[topic][0]
    if isolation_level == "read_committed":
        # Only committed records, and the batch stops at the open transaction (its first offset, 153: three
        # transactions of 50 records and a marker each).
        assert sorted(delivered) == sorted(committed)
        assert offsets == 153
    else:  # Java's default, and Kafka Connect's: aborted and still-open records are read too
        assert sorted(delivered) == sorted(committed + [f"a-{i}" for i in range(50)] + [f"open-{i}" for i in range(5)])
        assert offsets == 158

    open_transaction.commit_transaction(30)
    _materialize_until_caught_up(defs, name, instance)
    after = [m.data.decode() for m in drain(subscription)]
    assert sorted(after) == ([f"open-{i}" for i in range(5)] if isolation_level == "read_committed" else [])
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS)[topic][0] == 159  # past the marker


def test_a_broker_that_takes_sasl_plain(stack, spark, tmp_path, unique):
    topic, name = f"sasl-{unique}", f"sasl_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    user, password = stack.kafka_sasl_credentials()
    sasl = {"bootstrap_servers": stack.kafka_sasl_bootstrap_servers(), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_username": user}
    producer = Producer({"bootstrap.servers": sasl["bootstrap_servers"], "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password,
                         "log_level": 3})
    for i in range(1_000):
        producer.produce(topic, value=f"s{i}")
    assert producer.flush(30) == 0
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch={"outage_timeout_seconds": 10}))

    refused = materialize([defs.get_assets_def(name)], instance=DagsterInstance.ephemeral(), raise_on_error=False,
                          resources={**default_resources(), "kafka": KafkaResource(**sasl, sasl_password="not-the-password-3f9a")})
    assert not refused.success
    failure = next(e for e in refused.all_events if e.is_step_failure).step_failure_data.error
    assert f"Kafka at {sasl['bootstrap_servers']} refused the credentials of user 'bridge'" in failure.message
    assert "Authentication failed" in failure.message
    assert "not-the-password-3f9a" not in failure.message

    resources = {**default_resources(), "kafka": KafkaResource(**sasl, sasl_password=password)}
    _materialize_until_caught_up(defs, name, DagsterInstance.ephemeral(), resources)
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"s{i}" for i in range(1_000))


def test_a_broker_that_takes_tls_with_client_certificates(stack, spark, tmp_path, unique):
    """Kafka's SSL listener, which asks for a client certificate: the resource's PEM files reach the admin calls,
    the reader in the Spark task and the dead-letter producer alike."""
    topic, name = f"tls-{unique}", f"tls_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    cert, key = stack.kafka_client_tls()
    ca, _ = stack.local_certificate()
    tls = {"bootstrap_servers": stack.kafka_ssl_bootstrap_servers(), "security_protocol": "SSL",
           "ssl_ca_location": str(ca), "ssl_certificate_location": str(cert), "ssl_key_location": str(key)}
    produce(topic, [(None, f"t{i}") for i in range(1_000)])
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch={"outage_timeout_seconds": 10}))

    no_client_certificate = {k: v for k, v in tls.items() if k not in ("ssl_certificate_location", "ssl_key_location")}
    refused = materialize([defs.get_assets_def(name)], instance=DagsterInstance.ephemeral(), raise_on_error=False,
                          resources={**default_resources(), "kafka": KafkaResource(**no_client_certificate)})
    assert not refused.success
    failure = next(e for e in refused.all_events if e.is_step_failure).step_failure_data.error
    assert f"the TLS handshake with Kafka at {tls['bootstrap_servers']} failed (SSL; CA {ca}, client certificate " \
           "none)" in failure.message, failure.message
    assert "bad certificate" in failure.message

    resources = {**default_resources(), "kafka": KafkaResource(**tls)}
    _materialize_until_caught_up(defs, name, DagsterInstance.ephemeral(), resources)
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"t{i}" for i in range(1_000))


def test_asking_a_missing_topics_partitions_does_not_create_it(stack, unique):
    """The broker creates topics on request (auto.create.topics.enable, Kafka's default); a bridge or a test asking
    one topic's partitions before it exists must not create it with the broker's default partition count."""
    admin, topic = kafka_admin(), f"missing-{unique}"
    assert admin.partitions([topic]) == {}
    time.sleep(1.0)  # an auto-creation would show in the cluster's metadata by now
    assert topic not in admin.partitions(None, "missing-.*")


def test_records_at_tells_records_from_markers(stack, unique):
    """An always-on stream's stall check asks whether records wait past its position: offsets taken only by
    transaction markers, or by aborted records under read_committed, hold none."""
    topic = f"at-{unique}"
    admin = kafka_admin()
    admin.create_topic(topic, partitions=1)
    producer = _transactions(topic, unique)  # ... then the open one, 153-157, committed: its marker at 158
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"late-aborted-{i}", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)  # 159-163, its marker at 164
    deadline = time.monotonic() + 30  # the partition takes the abort's marker a moment after the call returns
    while admin.end_offsets({topic: [0]})[topic][0] < 165:
        assert time.monotonic() < deadline, "the abort's marker never reached the partition"
        time.sleep(0.1)
    assert admin.end_offsets({topic: [0]})[topic][0] == 165
    assert admin.records_at({topic: {0: 0}}, "read_committed")
    assert admin.records_at({topic: {0: 153}}, "read_committed")
    assert admin.records_at({topic: {0: 159}}, "read_uncommitted")
    assert not admin.records_at({topic: {0: 159}}, "read_committed", timeout_s=3)
    assert not admin.records_at({topic: {0: 164}}, "read_uncommitted", timeout_s=3)
