"""Demo topics, subscriptions and a small traffic generator for the demo bridges in bridges.yaml."""

from __future__ import annotations

import json
import random
import threading
from decimal import Decimal

from confluent_kafka import Producer

from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import KafkaConnection

PROJECT = "local-project"
KAFKA_TOPICS = {"demo.orders": 3, "demo.clicks": 2, "demo.orders.mirror": 3, "demo.clicks.mirror": 2,
                "demo.payments": 2}
PUBSUB_TOPICS = {"demo-orders": "demo-orders-sub", "demo-clicks": "demo-clicks-sub",
                 "demo-payments": "demo-payments-sub"}
LITE_LOCATION = "us-central1-a"
LITE_TOPICS = {"demo-clicks-lite": ("demo-clicks-lite-sub", 2)}  # topic -> (subscription, partitions)
S3_BUCKET = "demo-archive"
_CLICK_SCHEMA = {
    "type": "struct", "optional": False,
    "fields": [
        {"field": "page", "type": "string", "optional": False},
        {"field": "user", "type": "string", "optional": False},
        {"field": "dwell_ms", "type": "int64", "optional": True},
    ],
}


# demo.payments: Avro values in the Schema Registry's wire format, as confluent-kafka's AvroSerializer writes them.
PAYMENT_SCHEMA = json.dumps({"type": "record", "name": "Payment", "namespace": "demo", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}},
    {"name": "memo", "type": ["null", "string"], "default": None},
]})


def create_demo_resources(bootstrap_servers: str) -> list[str]:
    """Create what the demo bridges read and write; existing ones are kept. Returns what was created."""
    from google.api_core.exceptions import AlreadyExists
    from google.cloud import pubsub_v1

    created = []
    admin = KafkaAdmin(KafkaConnection(bootstrap_servers))
    for topic, partitions in KAFKA_TOPICS.items():
        if admin.create_topic(topic, partitions):
            created.append(f"kafka topic {topic}")
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    for topic, subscription in PUBSUB_TOPICS.items():
        topic_path = publisher.topic_path(PROJECT, topic)
        try:
            publisher.create_topic(name=topic_path)
            created.append(f"pubsub topic {topic}")
        except AlreadyExists:
            pass
        try:
            subscriber.create_subscription(name=subscriber.subscription_path(PROJECT, subscription), topic=topic_path)
            created.append(f"pubsub subscription {subscription}")
        except AlreadyExists:
            pass
    created.extend(_create_lite_resources())
    import boto3

    s3 = boto3.client("s3")  # AWS_ENDPOINT_URL points it at the local moto server
    if S3_BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        s3.create_bucket(Bucket=S3_BUCKET)
        created.append(f"s3 bucket {S3_BUCKET}")
    return created


def _create_lite_resources() -> list[str]:
    import os

    from google.api_core.exceptions import AlreadyExists
    from google.cloud.pubsublite import Subscription, Topic

    from connectors.pubsublite.clients import LiteConnection, subscription_path, topic_path

    connection = LiteConnection(api_endpoint=os.environ["PUBSUBLITE_API_ENDPOINT"],
                                ca_file=os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"])
    created = []
    for topic_id, (subscription_id, partitions) in LITE_TOPICS.items():
        topic = topic_path(PROJECT, LITE_LOCATION, topic_id)
        admin = connection.admin(topic.location.region)
        try:
            admin.create_topic(Topic(
                name=str(topic), partition_config=Topic.PartitionConfig(count=partitions),
                retention_config=Topic.RetentionConfig(per_partition_bytes=30 * 1024**3)))
            created.append(f"pubsub lite topic {topic_id}")
        except AlreadyExists:
            pass
        try:
            admin.create_subscription(Subscription(
                name=str(subscription_path(PROJECT, LITE_LOCATION, subscription_id)), topic=str(topic),
                delivery_config=Subscription.DeliveryConfig(
                    delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)))
            created.append(f"pubsub lite subscription {subscription_id}")
        except AlreadyExists:
            pass
    return created


class TrafficGenerator(threading.Thread):
    """Produces demo orders (text) and clicks (Kafka Connect JSON with schema) at a steady rate."""

    def __init__(self, bootstrap_servers: str, records_per_second: int = 20, schema_registry_url: str | None = None):
        super().__init__(name="demo-traffic", daemon=True)
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, "log_level": 3})
        self._payments = _payment_serializer(schema_registry_url) if schema_registry_url else None
        self._rate = records_per_second
        self._halt = threading.Event()
        self.produced = 0

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)

    def run(self) -> None:
        rng = random.Random(7)
        order_id = 0
        while not self._halt.is_set():
            for _ in range(self._rate):
                order_id += 1
                customer = f"customer-{rng.randint(1, 50)}"
                self._producer.produce(
                    "demo.orders", key=customer,
                    value=f"order {order_id}: {rng.randint(1, 5)} x item-{rng.randint(1, 200)}",
                )
                click = {"page": f"/products/{rng.randint(1, 200)}", "user": customer,
                         "dwell_ms": rng.randint(100, 30_000)}
                self._producer.produce(
                    "demo.clicks", key=customer,
                    value=json.dumps({"schema": _CLICK_SCHEMA, "payload": click}),
                    headers=[("source", b"demo-traffic")],
                )
                self.produced += 2
                if self._payments:
                    payment = {"id": order_id, "customer": customer, "currency": rng.choice(["EUR", "USD"]),
                               "amount": Decimal(rng.randint(100, 99_999)).scaleb(-2), "memo": f"order {order_id}"}
                    self._producer.produce("demo.payments", key=customer, value=self._payments(payment))
                    self.produced += 1
            self._producer.poll(0)
            self._halt.wait(1.0)
        self._producer.flush(10)
        self._producer = None  # a live producer keeps reconnecting (and logging) once Kafka stops


def _payment_serializer(schema_registry_url: str):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), PAYMENT_SCHEMA)
    context = SerializationContext("demo.payments", MessageField.VALUE)
    return lambda payment: serializer(payment, context)
