"""Test data for the benchmarks: Kafka topics, Pub/Sub and Lite topics filled with N records of a size."""

from __future__ import annotations

import functools
import os
import uuid

LITE_LOCATION = "us-central1-a"
PROJECT = "bench"


def unique_name(prefix: str) -> str:
    """A fresh name per measurement: nothing carries over from an earlier row."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def payload(size: int) -> bytes:
    """Random hex text: compresses about 2:1, like typical text records."""
    return os.urandom(size // 2 + 1).hex().encode()[:size]


def produce(topic: str, count: int, size: int) -> None:
    value = payload(size)
    _produce_values(topic, (value for _ in range(count)))


def _produce_values(topic: str, values) -> None:
    """Each value to `topic`, keyed by its number modulo 1,000, as fast as the producer takes them."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "linger.ms": 20,
                         "batch.size": 1_000_000, "log_level": 3})
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, key=str(i % 1000).encode(), value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def produce_avro(topic: str, count: int, size: int) -> None:
    """`count` Avro records of about `size` bytes (a payment: id, customer, decimal amount, memo text) in the
    Schema Registry's wire format, as confluent-kafka's AvroSerializer writes them."""
    import json
    from decimal import Decimal

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = json.dumps({"type": "record", "name": "Payment", "namespace": "bench", "fields": [
        {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "memo", "type": "string"}]})
    serialize = AvroSerializer(SchemaRegistryClient({"url": os.environ["SCHEMA_REGISTRY_URL"]}), schema)
    context = SerializationContext(topic, MessageField.VALUE)
    memo = payload(max(1, size - 40)).decode()
    _produce_values(topic, (serialize({"id": i, "customer": f"customer-{i % 50}",
                                       "amount": Decimal(i % 100_000).scaleb(-2), "memo": memo}, context)
                            for i in range(count)))


def delete_kafka_topic(bootstrap_servers: str, topic: str) -> None:
    """Delete a bench row's topic once measured: a row's copy holds gigabytes."""
    from confluent_kafka.admin import AdminClient

    # held: its futures fail once it is collected; warnings only, its INFO lines (a background queue purged as it is
    # destroyed) are not the bench's output
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    admin.delete_topics([topic])[topic].result(60)


def kafka_topic(name: str, partitions: int, count: int = 0, size: int = 0) -> str:
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"])).create_topic(name, partitions)
    if count:
        produce(name, count, size)
    return name


def pubsub_topic(name: str, subscribe: bool = True) -> tuple[str, str | None]:
    """(topic path, subscription path or None) on the emulator. A sink's destination needs no
    subscription: without one the emulator does not keep a copy of every message for it."""
    from google.cloud import pubsub_v1

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic = publisher.create_topic(name=publisher.topic_path(PROJECT, name)).name
    if not subscribe:
        return topic, None
    subscription = subscriber.create_subscription(
        name=subscriber.subscription_path(PROJECT, name), topic=topic).name
    return topic, subscription


def publish_pubsub(topic: str, count: int, size: int) -> None:
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=1000, max_latency=0.05))
    value = payload(size)
    for future in [publisher.publish(topic, value) for _ in range(count)]:
        future.result(120)


def lite_connection():
    from connectors.pubsublite.clients import LiteConnection

    return LiteConnection(api_endpoint=os.environ["PUBSUBLITE_API_ENDPOINT"],
                          ca_file=os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"])


def lite_topic(name: str, partitions: int):
    """(topic path, subscription path) on the local Lite server; the subscription has the topic's name."""
    from google.cloud.pubsublite import Subscription, Topic

    from connectors.pubsublite.clients import subscription_path, topic_path

    topic = topic_path(PROJECT, LITE_LOCATION, name)
    subscription = subscription_path(PROJECT, LITE_LOCATION, name)
    admin = lite_connection().admin(topic.location.region)
    admin.create_topic(Topic(name=str(topic), partition_config=Topic.PartitionConfig(count=partitions),
                             retention_config=Topic.RetentionConfig(per_partition_bytes=30 * 1024**3)))
    admin.create_subscription(Subscription(
        name=str(subscription), topic=str(topic), delivery_config=Subscription.DeliveryConfig(
            delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)))
    return topic, subscription


def publish_lite(topic: str, count: int, size: int, chunk: int = 20_000) -> None:
    """`count` messages of `size` bytes to the Lite topic at path `topic`, `chunk` in flight at a time (a list of
    millions of futures would not fit). A string, so that a process of its own can be handed it."""
    from google.cloud.pubsublite.cloudpubsub import PublisherClient
    from google.cloud.pubsublite.types import TopicPath

    path, value = TopicPath.parse(str(topic)), payload(size)
    with PublisherClient(**lite_connection().client_kwargs(path.location.region)) as publisher:
        for start in range(0, count, chunk):
            for future in [publisher.publish(path, value) for _ in range(min(chunk, count - start))]:
                future.result(120)


@functools.cache
def kafka_admin(bootstrap_servers: str):
    """One admin per cluster, kept for the benchmark's process."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    return KafkaAdmin(KafkaConnection(bootstrap_servers))


def topic_records(bootstrap_servers: str, topic: str, isolation_level: str = "read_uncommitted") -> int:
    """The sum of `topic`'s end offsets (its last stable offsets under read_committed); 0 before it exists."""
    admin = kafka_admin(bootstrap_servers)
    partitions = admin.partitions([topic]).get(topic)
    if not partitions:
        return 0
    return sum(admin.end_offsets({topic: partitions}, isolation_level)[topic].values())


def filled_subscription(admin, prefix: str, size: int, records: int) -> tuple[str, str]:
    """A Pub/Sub subscription holding `records` messages, and an empty LogAppendTime Kafka topic of the same name."""
    name = unique_name(prefix)
    source, subscription = pubsub_topic(name)
    publish_pubsub(source, records, size)
    admin.create_topic(name, 4, {"message.timestamp.type": "LogAppendTime"})
    return subscription, name
