"""The subscription's topic, asked of Pub/Sub (for the lineage page)."""

from __future__ import annotations

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig

ADMIN_TIMEOUT_S = 10


def subscription_topic(connection: PubSubConnection, config: CloudPubSubSourceConfig) -> str:
    """The subscription's topic, `projects/p/topics/t` (one admin call)."""
    subscriber = connection.subscriber()
    path = subscriber.subscription_path(config.cps_project, config.cps_subscription)
    return subscriber.get_subscription(subscription=path, timeout=ADMIN_TIMEOUT_S).topic
