"""Test clients for the local Pub/Sub Lite server, through the real client library."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import yaml
from google.cloud.pubsublite import Subscription, Topic
from google.cloud.pubsublite.types import CloudZone, SubscriptionPath, TopicPath
from google.cloud.pubsublite_v1 import types

from connectors.pubsublite.clients import LiteConnection

PROJECT = "test-project"
LOCATION = "us-central1-a"


def lite_connection() -> LiteConnection:
    return LiteConnection(api_endpoint=os.environ["PUBSUBLITE_API_ENDPOINT"],
                          ca_file=os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"])


def create_lite_topic(topic_id: str, partitions: int = 2, per_partition_bytes: int = 30 * 1024**3,
                      subscription: bool = True) -> tuple[TopicPath, SubscriptionPath]:
    zone = CloudZone.parse(LOCATION)
    topic = TopicPath(PROJECT, zone, topic_id)
    admin = lite_connection().admin(zone.region)
    admin.create_topic(Topic(
        name=str(topic),
        partition_config=Topic.PartitionConfig(count=partitions, capacity=Topic.PartitionConfig.Capacity(
            publish_mib_per_sec=4, subscribe_mib_per_sec=8)),
        retention_config=Topic.RetentionConfig(per_partition_bytes=per_partition_bytes)))
    path = SubscriptionPath(PROJECT, zone, f"{topic_id}-sub")
    if subscription:
        admin.create_subscription(Subscription(
            name=str(path), topic=str(topic), delivery_config=Subscription.DeliveryConfig(
                delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)))
    return topic, path


def read_lite_partition(subscription: SubscriptionPath, partition: int, count: int, timeout_s: float = 30) -> list:
    """The first `count` raw SequencedMessages of a partition, from offset 0, over the gapic stream."""
    from google.cloud.pubsublite_v1 import SubscriberServiceClient

    if count == 0:
        return []
    client = SubscriberServiceClient(**lite_connection().client_kwargs(subscription.location.region))
    done = threading.Event()

    def requests():
        yield types.SubscribeRequest(initial=types.InitialSubscribeRequest(
            subscription=str(subscription), partition=partition,
            initial_location=types.SeekRequest(cursor=types.Cursor(offset=0))))
        yield types.SubscribeRequest(flow_control=types.FlowControlRequest(
            allowed_messages=count, allowed_bytes=1 << 40))
        done.wait(timeout_s)

    stream = client.subscribe(requests=requests(), timeout=timeout_s)
    messages = []
    try:
        for response in stream:
            messages.extend(types.SubscribeResponse.pb(response).messages.messages)
            if len(messages) >= count:
                break
    finally:
        done.set()
        stream.cancel()
    return messages


def read_lite_topic(subscription: SubscriptionPath, counts: dict[int, int]) -> dict[int, list]:
    return {p: read_lite_partition(subscription, p, n) for p, n in counts.items()}


def read_whole_lite_topic(topic: TopicPath, subscription: SubscriptionPath, partitions: int) -> list:
    """Every message of every partition, up to each partition's head now."""
    stats = lite_connection().topic_stats_service(topic.location.region)
    heads = {p: stats.compute_head_cursor(request={"topic": str(topic), "partition": p}).head_cursor.offset
             for p in range(partitions)}
    return [m for messages in read_lite_topic(subscription, heads).values() for m in messages]


def lite_committed(subscription: SubscriptionPath) -> dict[int, int]:
    """The subscription's committed cursor per partition."""
    client = lite_connection().cursor_service(subscription.location.region)
    return {c.partition: c.cursor.offset for c in client.list_partition_cursors(request={"parent": str(subscription)})}


def publish_lite(topic: TopicPath, messages: list[dict]) -> list:
    """Publish with the library's high-level publisher; each dict holds data and optional ordering_key
    and attributes. Returns the message ids (partition and offset)."""
    from google.cloud.pubsublite.cloudpubsub import PublisherClient

    with PublisherClient(**lite_connection().client_kwargs(topic.location.region)) as publisher:
        futures = [publisher.publish(topic, m["data"], ordering_key=m.get("ordering_key", ""),
                                     **m.get("attributes", {})) for m in messages]
        return [f.result(timeout=60) for f in futures]


def lite_bridges_file(directory: Path, name: str, connector: str, config: dict, batch: dict | None = None,
                      continuous: dict | None = None) -> str:
    """A bridges file of one Lite bridge, in micro-batch mode unless `continuous` settings are given."""
    entry = {"name": name, "connector": connector, "mode": "continuous" if continuous else "batch",
             "config": {"pubsublite.project": PROJECT, "pubsublite.location": LOCATION, **config}}
    if batch:
        entry["batch"] = batch
    if continuous:
        entry["continuous"] = continuous
    path = directory / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [entry]}))
    return str(path)
