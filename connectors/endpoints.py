"""The topics, subscriptions and prefixes outside the product that a bridge reads or writes, as a connector
declares them (the Dagster layer draws them as external assets on the lineage page)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Endpoint:
    """A topic, subscription or S3 prefix outside Dagster that a bridge reads or writes."""

    key: tuple[str, ...]  # the asset key's path
    kind: str  # the system, shown as the asset's kind tag
    description: str
    # A subscription's topic, looked up at load: (what to ask, how to ask it) -> the topic's Endpoint.
    fed_by: Callable[[], Endpoint | None] | None = None


def kafka_topic(topic: str) -> Endpoint:
    return Endpoint(("kafka", topic), "kafka", f"Kafka topic {topic}")


def pubsub_topic(project: str, topic: str) -> Endpoint:
    return Endpoint(("pubsub", project, "topics", topic), "pubsub",
                    f"Pub/Sub topic projects/{project}/topics/{topic}")


def pubsub_subscription(project: str, subscription: str, topic_of: Callable[[], str | None]) -> Endpoint:
    """`topic_of` answers the subscription's topic as `projects/p/topics/t` (None: unknown)."""

    def fed_by() -> Endpoint | None:
        path = topic_of()
        parts = path.split("/") if path else []
        return pubsub_topic(parts[1], parts[3]) if len(parts) == 4 else None

    return Endpoint(("pubsub", project, "subscriptions", subscription), "pubsub",
                    f"Pub/Sub subscription projects/{project}/subscriptions/{subscription}", fed_by)


def lite_topic(path: str) -> Endpoint:
    """`path`: projects/p/locations/l/topics/t."""
    _, project, _, location, _, name = str(path).split("/")
    return Endpoint(("pubsublite", project, location, "topics", name), "pubsublite",
                    f"Pub/Sub Lite topic {path}")


def lite_subscription(path: str, topic_of: Callable[[], str | None]) -> Endpoint:
    _, project, _, location, _, name = str(path).split("/")

    def fed_by() -> Endpoint | None:
        topic = topic_of()
        return lite_topic(topic) if topic else None

    return Endpoint(("pubsublite", project, location, "subscriptions", name), "pubsublite",
                    f"Pub/Sub Lite subscription {path}", fed_by)


def s3_prefix(bucket: str, prefix: str) -> Endpoint:
    return Endpoint(("s3", bucket, *[p for p in prefix.split("/") if p]), "s3",
                    f"S3 s3://{bucket}/{prefix}")
