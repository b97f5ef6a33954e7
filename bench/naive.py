"""Naive baselines: the single-process loop a user might write in an afternoon, one message at a time.

Each runs for a bounded time and reports its rate (records/s); the bridge's speed is compared to it.
"""

from __future__ import annotations

import os
import time

from bench.data import lite_connection

DURATION_S = float(os.environ.get("BENCH_NAIVE_SECONDS", "15"))


def _consumer(topic: str):
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": f"naive-{topic}",
                         "auto.offset.reset": "earliest", "log_level": 3})
    consumer.subscribe([topic])
    return consumer


def kafka_to_pubsub(topic: str, pubsub_topic: str) -> float:
    """for each record: publish it and wait for the message id, like the client's quickstart."""
    from google.cloud import pubsub_v1

    consumer, publisher = _consumer(topic), pubsub_v1.PublisherClient()
    moved, started = 0, time.monotonic()
    while time.monotonic() - started < DURATION_S:
        message = consumer.poll(1.0)
        if message is None or message.error():
            continue
        publisher.publish(pubsub_topic, message.value(), key=message.key().decode()).result()
        moved += 1
    consumer.close()
    return moved / (time.monotonic() - started)


def kafka_to_lite(topic: str, lite_topic) -> float:
    from google.cloud.pubsublite.cloudpubsub import PublisherClient

    consumer = _consumer(topic)
    moved, started = 0, time.monotonic()
    with PublisherClient(**lite_connection().client_kwargs(lite_topic.location.region)) as publisher:
        while time.monotonic() - started < DURATION_S:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            publisher.publish(lite_topic, message.value(), ordering_key=message.key().decode()).result()
            moved += 1
    consumer.close()
    return moved / (time.monotonic() - started)


def pubsub_to_kafka(subscription: str, topic: str) -> float:
    """pull a handful, for each message: produce it and wait for Kafka, then ack."""
    from confluent_kafka import Producer
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    moved, started = 0, time.monotonic()
    while time.monotonic() - started < DURATION_S:
        response = subscriber.pull(subscription=subscription, max_messages=10, timeout=10)
        for received in response.received_messages:
            producer.produce(topic, value=received.message.data)
            producer.flush()
            subscriber.acknowledge(subscription=subscription, ack_ids=[received.ack_id])
            moved += 1
    return moved / (time.monotonic() - started)


def lite_to_kafka(subscription, topic: str) -> float:
    """the Lite subscriber's callback: produce, wait for Kafka, ack."""
    import threading

    from confluent_kafka import Producer
    from google.cloud.pubsublite.cloudpubsub import SubscriberClient
    from google.cloud.pubsublite.types import FlowControlSettings

    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    moved, lock = [0], threading.Lock()

    def callback(message):
        with lock:
            producer.produce(topic, value=message.data)
            producer.flush()
            moved[0] += 1
        message.ack()

    with SubscriberClient(**lite_connection().client_kwargs(subscription.location.region)) as subscriber:
        started = time.monotonic()
        future = subscriber.subscribe(subscription, callback, FlowControlSettings(
            messages_outstanding=1000, bytes_outstanding=10_000_000))
        time.sleep(DURATION_S)
        future.cancel()
        return moved[0] / (time.monotonic() - started)
