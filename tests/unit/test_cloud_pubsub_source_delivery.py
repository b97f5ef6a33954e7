"""The Cloud Pub/Sub source's pipelined delivery (write.PulledDelivery): a message is acked only after Kafka
acknowledged its record, a refused record stops the acks, and what waits on Kafka is bounded. Kafka and Pub/Sub
are stand-ins that hold each record's acknowledgement until the test lets it go; the end-to-end tests run the
same code against the real broker and pstest."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError
from google.protobuf.timestamp_pb2 import Timestamp

from connectors.cloud_pubsub_source import write
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter
from connectors.errors import BatchError


class HeldProducer:
    """Queues each record's delivery callback; `answer` releases them (with an error for the values named)."""

    def __init__(self):
        self.waiting: list = []
        self.refuse: set[bytes] = set()
        self.answer_on_poll = False

    def produce(self, topic, key=None, value=None, headers=None, timestamp=None, on_delivery=None, partition=None):
        self.waiting.append((value, on_delivery))

    def answer(self) -> None:
        waiting, self.waiting = self.waiting, []
        for value, callback in waiting:
            error = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE) if value in self.refuse else None
            callback(error, SimpleNamespace(partition=lambda: 0))

    def poll(self, timeout=0):
        if self.answer_on_poll:
            self.answer()
        return 0

    def flush(self, timeout=0):
        self.answer()
        return 0


class Subscriber:
    def __init__(self):
        self.acked: list[str] = []
        self.extended: list[str] = []
        self.lock = threading.Lock()

    def acknowledge(self, subscription, ack_ids):
        with self.lock:
            self.acked += ack_ids

    def modify_ack_deadline(self, subscription, ack_ids, ack_deadline_seconds):
        self.extended += ack_ids


def received(*values: bytes) -> list:
    return [SimpleNamespace(ack_id=f"ack-{v.decode()}", message=SimpleNamespace(
        data=v, attributes={}, ordering_key="", message_id=f"id-{v.decode()}",
        publish_time=Timestamp(seconds=1))) for v in values]


@pytest.fixture
def parts():
    config = CloudPubSubSourceConfig.model_validate(
        {"cps.project": "p", "cps.subscription": "s", "kafka.topic": "t"})
    producer, subscriber = HeldProducer(), Subscriber()
    delivery = write._Delivery(config, producer)
    return SimpleNamespace(producer=producer, subscriber=subscriber, delivery=delivery,
                           converter=CloudPubSubSourceConverter(config))


def test_a_pull_is_acked_only_after_kafka_acknowledged_it_and_all_of_it_by_the_end(parts):
    with write.PulledDelivery(parts.subscriber, "sub", parts.delivery) as pulls:
        pulls.deliver(parts.converter, received(b"a", b"b"))
        assert parts.subscriber.acked == []  # Kafka has not answered: the next pull may go out, no ack yet
        pulls.deliver(parts.converter, received(b"c"))
        parts.producer.answer()
        pulls.settle()
    assert sorted(parts.subscriber.acked) == ["ack-a", "ack-b", "ack-c"]
    assert parts.delivery.totals == {"pulled": 3, "acked": 3, "dropped": 0}


def test_a_record_kafka_refuses_stops_the_acks(parts):
    parts.producer.refuse = {b"bad"}
    with pytest.raises(BatchError, match="did not accept 1 records: message id-bad"):
        with write.PulledDelivery(parts.subscriber, "sub", parts.delivery) as pulls:
            pulls.deliver(parts.converter, received(b"a", b"bad", b"c"))
            parts.producer.answer()
            pulls.settle()
    assert parts.subscriber.acked == []  # nothing acked: Pub/Sub delivers all three again


def test_errors_tolerance_all_acks_a_refused_record_as_dropped(parts):
    parts.delivery.config = parts.delivery.config.model_copy(update={"errors_tolerance": "all"})
    parts.producer.refuse = {b"bad"}
    with write.PulledDelivery(parts.subscriber, "sub", parts.delivery) as pulls:
        pulls.deliver(parts.converter, received(b"a", b"bad"))
    assert sorted(parts.subscriber.acked) == ["ack-a", "ack-bad"]
    assert parts.delivery.totals == {"pulled": 2, "acked": 2, "dropped": 1}


def test_past_the_in_flight_bound_a_pull_waits_for_kafka(parts, monkeypatch):
    monkeypatch.setattr(write, "MAX_IN_FLIGHT", 2)
    parts.producer.answer_on_poll = True  # Kafka answers while the task waits on it
    with write.PulledDelivery(parts.subscriber, "sub", parts.delivery) as pulls:
        pulls.deliver(parts.converter, received(b"a", b"b", b"c"))
        assert parts.delivery.in_flight <= 2
        assert parts.producer.waiting == []
