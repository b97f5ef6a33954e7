"""CloudPubSubSourceConnector with exactly.once.support=required, against pstest and Kafka: records and their message
ids commit in one Kafka transaction before the messages are acked, and a message Pub/Sub gives again after a commit
whose acks were lost is recognized and acked, not written again."""

from __future__ import annotations

import json
import os
import time

import pytest
from confluent_kafka import Producer
from google.cloud import pubsub_v1

from bridge_assets.definitions import build_definitions
from connectors.bridges_file import load_bridges
from connectors.cloud_pubsub_source.exactly_once import position_key
from connectors.kafka.transactions import PositionsTopic
from tests.e2e.helpers import (
    cloud_source_bridges_file, create_pubsub_topic, drain, kafka_admin, materialize_bridge, publish_pubsub_messages,
    read_committed,
)

pytestmark = pytest.mark.e2e
EXACTLY_ONCE = {"exactly.once.support": "required"}


def _slot_records(positions: str, config, slots: int) -> dict[int, dict]:
    topic = PositionsTopic(positions, {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    return topic.latest_of({slot: position_key(config, slot) for slot in range(slots)})


def test_records_commit_before_their_acks_and_a_message_given_again_is_recognized(stack, spark, tmp_path, unique):
    name, kafka_topic = f"eos_cps_{unique}", f"eos-from-cps-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=3)
    subscription = create_pubsub_topic(f"eos-cps-{unique}")
    bridges = cloud_source_bridges_file(tmp_path, name, subscription, kafka_topic,
                                        {**EXACTLY_ONCE, "kafka.partition.count": 3}, {"parallelism": 2})
    defs = build_definitions(bridges)
    config = load_bridges(bridges)[0].config
    publish_pubsub_messages(f"eos-cps-{unique}", [(f"m{i}".encode(), {}) for i in range(300)])

    first = materialize_bridge(defs, name)
    assert first["records_written"].value == first["messages_acked"].value == 300
    values = [r.value() for r in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], kafka_topic, 3)]
    assert sorted(values) == sorted(f"m{i}".encode() for i in range(300))
    assert drain(subscription) == []  # acked once committed
    positions = f"bridge-offsets.{name}"
    assert len(kafka_admin().partitions([positions])[positions]) == 2  # a slot per pull task
    # Each slot's last record no longer holds what its acks settled.
    assert all(record["pending"] == {} for record in _slot_records(positions, config, 2).values())

    # A commit whose acks were lost: the messages' records are in Kafka (written here) and a slot's record holds
    # their ids pending; Pub/Sub gives them again.
    publish_pubsub_messages(f"eos-cps-{unique}", [(f"n{i}".encode(), {}) for i in range(40)])
    subscriber = pubsub_v1.SubscriberClient()
    received = []
    while len(received) < 40:
        received += subscriber.pull(subscription=subscription, max_messages=40, timeout=10).received_messages
    ids = {m.message.message_id: 1 for m in received}
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    for m in received:
        producer.produce(kafka_topic, value=m.message.data)
    producer.produce(positions, key=position_key(config, 1).encode(), partition=1,
                     value=json.dumps({"pending": {mid: 1 << 50 for mid in ids}, "released": {}}).encode())
    producer.flush(10)
    subscriber.modify_ack_deadline(subscription=subscription, ack_ids=[m.ack_id for m in received],
                                   ack_deadline_seconds=0)  # given again at once

    second = materialize_bridge(defs, name)
    assert second["records_written"].value == 0
    assert second["messages_recognized"].value == 40
    assert drain(subscription) == []
    values = [r.value() for r in read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], kafka_topic, 3)]
    assert len(values) == len(set(values)) == 340
    # Whichever slot recognized them dropped them (its own) or released them (slot 1's); runs with nothing to move
    # then clear both records (the slots run at once, so a release may take a run to be seen).
    for _ in range(3):
        records = _slot_records(positions, config, 2)
        if records[1]["pending"] == {} and records[0]["released"] == {}:
            break
        assert materialize_bridge(defs, name)["records_written"].value == 0
    assert records[1]["pending"] == {} and records[0]["released"] == {}, records


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_a_record_kafka_refuses_aborts_the_transaction_and_nothing_is_acked(stack, spark, tmp_path, unique,
                                                                             tolerance):
    """Under a transaction a record refused after it was sent cannot be skipped alone, errors.tolerance=all or not:
    the run fails naming the message, nothing of the transaction is visible, and every message comes again."""
    name, kafka_topic = f"eos_refused_{tolerance}_{unique}", f"eos-refused-{tolerance}-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1, config={"max.message.bytes": "2000"})
    subscription = create_pubsub_topic(f"eos-refused-{tolerance}-{unique}")
    publish_pubsub_messages(f"eos-refused-{tolerance}-{unique}",
                            [(f"m{i}".encode(), {}) for i in range(20)] + [(b"x" * 5000, {})])
    defs = build_definitions(cloud_source_bridges_file(
        tmp_path, name, subscription, kafka_topic, {**EXACTLY_ONCE, "errors.tolerance": tolerance},
        {"parallelism": 1}))

    # The broker refuses the whole produce request the large record is in: the error names the largest first.
    with pytest.raises(Exception, match=r"did not accept \d+ records: message \S+ \(5000 bytes\): Broker: Message"):
        materialize_bridge(defs, name)
    assert read_committed(os.environ["KAFKA_BOOTSTRAP_SERVERS"], kafka_topic, 1, 1) == []
    # Nothing was acked: every message comes again once its ack deadline (the subscription's 10 s) has passed.
    again, deadline = [], time.monotonic() + 60
    while len(again) < 21 and time.monotonic() < deadline:
        time.sleep(1)
        again += drain(subscription)
    assert sorted(m.data for m in again) == sorted([f"m{i}".encode() for i in range(20)] + [b"x" * 5000])
