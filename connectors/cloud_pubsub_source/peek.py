"""Whether a subscription has a message to deliver, without taking it: the Cloud source's cheap signal.

Pub/Sub shows no backlog without Cloud Monitoring (and the emulator has none), so a continuous bridge
asks by pulling one message and handing it straight back (ack deadline 0), which makes it deliverable
again at once. Its delivery attempt count goes up by one: a subscription with a dead-letter policy
counts the peek as an attempt.
"""

from __future__ import annotations

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.outage import google_unanswered, outages_named

PEEK_TIMEOUT_S = 10


class SubscriptionPeek:
    def __init__(self, connection: PubSubConnection, config: CloudPubSubSourceConfig):
        self._connection = connection
        self._subscriber = connection.subscriber()
        self._path = self._subscriber.subscription_path(config.cps_project, config.cps_subscription)

    def has_messages(self) -> bool:
        with outages_named("Pub/Sub", self._connection.address, f"looking for messages in {self._path}",
                           google_unanswered()):
            # return_immediately: an empty subscription answers at once, not after a held pull
            # (the emulator holds one for 0.5 s, the service longer); the loop asks again later.
            response = self._subscriber.pull(subscription=self._path, max_messages=1, return_immediately=True,
                                             timeout=PEEK_TIMEOUT_S)
            ack_ids = [m.ack_id for m in response.received_messages]
            if ack_ids:
                self._subscriber.modify_ack_deadline(subscription=self._path, ack_ids=ack_ids, ack_deadline_seconds=0)
        return bool(ack_ids)


def subscription_topic(connection: PubSubConnection, config: CloudPubSubSourceConfig) -> str:
    """The subscription's topic, `projects/p/topics/t` (one admin call)."""
    subscriber = connection.subscriber()
    path = subscriber.subscription_path(config.cps_project, config.cps_subscription)
    return subscriber.get_subscription(subscription=path, timeout=PEEK_TIMEOUT_S).topic
