"""Raw limits on this machine: each end of a bridge alone, driven as fast as a plain Python program can, and Kafka
read by Kafka's own consumer perf tool.

The bridge cannot beat the slower end of its path; its throughput is reported as a ratio of that.
"""

from __future__ import annotations

import os
import subprocess
import time

from bench.data import lite_connection, payload


def kafka_consume(topic: str, count: int) -> float:
    """Records/s of librdkafka alone reading `count` records of a topic from the start."""
    from confluent_kafka import Consumer, TopicPartition

    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    partitions = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"])).partitions([topic])[topic]
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "bench-limit",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    started, seen = time.monotonic(), 0
    while seen < count:
        seen += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    elapsed = time.monotonic() - started
    consumer.close()
    return count / elapsed


def kafka_produce(topic: str, count: int, size: int) -> float:
    """Records/s of librdkafka alone writing `count` records with the source's producer settings."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "log_level": 3})
    value = payload(size)
    started = time.monotonic()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    return count / (time.monotonic() - started)


def brokers_consume(topic: str, count: int) -> float:
    """Records/s of Kafka's own consumer (ConsumerPerformance, Java: no per-record work of a Python program) reading
    `count` records of a topic from the start, group join excluded (its fetch.nMsg.sec)."""
    from local_stack.fetch import kafka_tools_jars

    tool = "org.apache.kafka.tools.ConsumerPerformance"
    out = subprocess.run(["java", "-Xmx1g", "-cp", f"{kafka_tools_jars()}/*", tool,
                          "--bootstrap-server", os.environ["KAFKA_BOOTSTRAP_SERVERS"], "--topic", topic,
                          "--messages", str(count), "--timeout", "60000"],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    return consumer_performance_rate(out)


def consumer_performance_rate(out: str) -> float:
    """fetch.nMsg.sec of ConsumerPerformance's summary (a header line, then one line of comma-separated values)."""
    header, values = [line for line in out.splitlines() if "," in line][-2:]
    stats = dict(zip((name.strip() for name in header.split(",")), (value.strip() for value in values.split(","))))
    return float(stats["fetch.nMsg.sec"])


def pubsub_publish(topic: str, count: int, size: int) -> float:
    """Messages/s of the Pub/Sub client with the largest batches the service takes (1,000 messages,
    ~9.5 MB), every future awaited: the best a plain Python publisher does against this emulator."""
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(
        max_messages=1000, max_bytes=9_500_000, max_latency=0.05))
    value = payload(size)
    started = time.monotonic()
    for future in [publisher.publish(topic, value) for _ in range(count)]:
        future.result(120)
    return count / (time.monotonic() - started)


def pubsub_pull(subscription: str, count: int) -> float:
    """Messages/s of unary pull (1,000 per call) and ack, the emulator's fastest way out."""
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    started, seen = time.monotonic(), 0
    while seen < count:
        response = subscriber.pull(subscription=subscription, max_messages=1000, timeout=30)
        if response.received_messages:
            subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in response.received_messages])
        seen += len(response.received_messages)
    return count / (time.monotonic() - started)


def lite_publish(topic, count: int, size: int) -> float:
    """Messages/s of the Lite library's publisher (its default batching), every future awaited."""
    from google.cloud.pubsublite.cloudpubsub import PublisherClient

    value = payload(size)
    with PublisherClient(**lite_connection().client_kwargs(topic.location.region)) as publisher:
        started = time.monotonic()
        for future in [publisher.publish(topic, value) for _ in range(count)]:
            future.result(120)
        return count / (time.monotonic() - started)


def lite_subscribe(subscription, count: int) -> float:
    """Messages/s of the Lite library's subscriber, acking each message."""
    import threading

    from google.cloud.pubsublite.cloudpubsub import SubscriberClient
    from google.cloud.pubsublite.types import FlowControlSettings

    seen, done = [0], threading.Event()

    def callback(message):
        message.ack()
        seen[0] += 1
        if seen[0] >= count:
            done.set()

    with SubscriberClient(**lite_connection().client_kwargs(subscription.location.region)) as subscriber:
        started = time.monotonic()
        future = subscriber.subscribe(subscription, callback, FlowControlSettings(
            messages_outstanding=10_000, bytes_outstanding=20_000_000))
        done.wait(300)
        elapsed = time.monotonic() - started
        future.cancel()
    return count / elapsed


def s3_put(bucket: str, count: int, size: int) -> float:
    """Records/s equivalent of uploading count*size bytes as 8 MiB objects with boto3 (one stream)."""
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    total, chunk = count * size, payload(8 << 20)
    started, sent, index = time.monotonic(), 0, 0
    while sent < total:
        body = chunk[: min(len(chunk), total - sent)]
        s3.put_object(Bucket=bucket, Key=f"limit/{index}", Body=body)
        sent += len(body)
        index += 1
    return count / (time.monotonic() - started)
