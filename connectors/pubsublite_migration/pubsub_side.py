"""What a migration to Cloud Pub/Sub asks of Pub/Sub: the target topic, the subscriptions it creates (each Lite
subscription's, filtered to what that subscription had not acknowledged, and one unfiltered check subscription),
publishing, and reading the check subscription back without acknowledging it.

Messages take Google's own Lite -> Pub/Sub mapping (the Lite client library's `message_transforms`, which its
Cloud Pub/Sub-style subscriber and export subscriptions use): the key becomes the ordering key, each attribute's one
value its UTF-8 string, the event time the `x-goog-pubsublite-event-time` attribute ("seconds,nanos"). Added:
`lite.partition` and `lite.offset` (so a copy can be recognised and duplicates told apart), and a
`lite.acked.<subscription>` marker for each Lite subscription that had already acknowledged the message."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub.request_publisher import PublishSettings, RequestPublisher
from connectors.errors import BatchError

PARTITION_ATTRIBUTE = "lite.partition"
OFFSET_ATTRIBUTE = "lite.offset"
ACKED_PREFIX = "lite.acked."
EVENT_TIME_ATTRIBUTE = "x-goog-pubsublite-event-time"  # the Lite client library's name and encoding
CHECK_SUBSCRIPTION_SUFFIX = "-lite-migration-check"
# Longer than one verification's reading takes: a message it holds is not handed to it twice.
CHECK_ACK_DEADLINE_S = 600
EMPTY_PULLS_TO_END = 3
PULL_TIMEOUT_S = 10
PUBLISH_SETTINGS = PublishSettings(max_messages=1000, max_bytes=9_000_000, delay_s=0.01, request_timeout_s=60,
                                   total_timeout_s=600, max_outstanding_messages=10_000,
                                   max_outstanding_bytes=64 << 20)
_TOPIC_PATH = re.compile(r"projects/([^/]+)/topics/([^/]+)")


class MessageRefused(BatchError):
    """A Lite message Pub/Sub cannot carry as it is (a key or attribute that is not UTF-8, an attribute with
    several values)."""


def acked_filter(lite_subscription: str) -> str:
    """The filter of a Lite subscription's Pub/Sub subscription: every message it had not acknowledged."""
    return f'NOT attributes:"{ACKED_PREFIX}{lite_subscription.rsplit("/", 1)[-1]}"'


def pubsub_message(sequenced, partition: int, acked_by: list[str]):
    """A raw PubsubMessage for a raw Lite SequencedMessage; `acked_by` are the short names of the Lite
    subscriptions whose cursor was past it."""
    from google.pubsub_v1.types import PubsubMessage

    message, offset = sequenced.message, sequenced.cursor.offset
    where = f"Lite partition {partition} offset {offset}"
    try:
        ordering_key = bytes(message.key).decode()
    except UnicodeDecodeError:
        raise MessageRefused(f"{where}: its key is not UTF-8, and Pub/Sub's ordering key is a string") from None
    attributes = {}
    for name, values in message.attributes.items():
        if len(values.values) != 1:
            raise MessageRefused(f"{where}: attribute {name!r} has {len(values.values)} values; a Pub/Sub "
                                 "attribute has one")
        try:
            attributes[name] = bytes(values.values[0]).decode()
        except UnicodeDecodeError:
            raise MessageRefused(f"{where}: attribute {name!r} is not UTF-8, and Pub/Sub's are strings") from None
    if message.HasField("event_time"):
        attributes[EVENT_TIME_ATTRIBUTE] = f"{message.event_time.seconds},{message.event_time.nanos}"
    attributes[PARTITION_ATTRIBUTE] = str(partition)
    attributes[OFFSET_ATTRIBUTE] = str(offset)
    for name in acked_by:
        attributes[ACKED_PREFIX + name] = "true"
    return PubsubMessage.pb()(data=bytes(message.data), attributes=attributes, ordering_key=ordering_key)


@dataclass(frozen=True)
class CheckedMessage:
    partition: int
    offset: int
    key: bytes
    data: bytes
    acked_by: frozenset[str]  # Lite subscriptions' short names


class PubSubSide:
    def __init__(self, connection: PubSubConnection, topic: str):
        match = _TOPIC_PATH.fullmatch(topic)
        if not match:
            raise ValueError(f"--pubsub-topic {topic!r} is not a Pub/Sub topic path (projects/PROJECT/topics/TOPIC)")
        self.connection, self.topic = connection, topic
        self.project, self.topic_id = match.groups()
        self._publisher = connection.publisher()
        self._subscriber = connection.subscriber()

    def subscription_path(self, name: str) -> str:
        return f"projects/{self.project}/subscriptions/{name}"

    @property
    def check_subscription(self) -> str:
        return self.subscription_path(self.topic_id + CHECK_SUBSCRIPTION_SUFFIX)

    def topic_exists(self) -> bool:
        from google.api_core.exceptions import NotFound

        try:
            self._publisher.get_topic(topic=self.topic)
            return True
        except NotFound:
            return False

    def create_topic(self) -> None:
        self._publisher.create_topic(name=self.topic)

    def subscription_filter(self, path: str) -> str | None:
        """The subscription's filter ("" for none), None when it does not exist. Refuses one of another topic."""
        from google.api_core.exceptions import NotFound

        try:
            subscription = self._subscriber.get_subscription(subscription=path)
        except NotFound:
            return None
        if subscription.topic != self.topic:
            raise ValueError(f"Pub/Sub subscription {path} exists on topic {subscription.topic}, not {self.topic}")
        return subscription.filter

    def create_subscription(self, path: str, filter_: str, ordered: bool, ack_deadline_s: int = 60) -> None:
        self._subscriber.create_subscription(request={
            "name": path, "topic": self.topic, "filter": filter_, "enable_message_ordering": ordered,
            "ack_deadline_seconds": ack_deadline_s})

    def publisher(self, on_acked, on_rejected) -> RequestPublisher:
        return RequestPublisher(self.connection.shared_publish_channel(), self.topic, PUBLISH_SETTINGS, on_acked,
                                on_rejected)

    def read_check_subscription(self) -> Iterator[CheckedMessage | None]:
        """Every message the check subscription holds (None for one that is not a copy of a Lite message), read
        without acknowledging: at the end each is handed back (deadline 0), so the next verification sees it
        again."""
        path, held = self.check_subscription, []
        empty = 0
        try:
            while empty < EMPTY_PULLS_TO_END:
                received = self._subscriber.pull(subscription=path, max_messages=1000,
                                                  timeout=PULL_TIMEOUT_S).received_messages
                empty = 0 if received else empty + 1
                for r in received:
                    held.append(r.ack_id)
                    yield _checked(r.message)
        finally:
            for start in range(0, len(held), 1000):
                self._subscriber.modify_ack_deadline(subscription=path, ack_ids=held[start:start + 1000],
                                                     ack_deadline_seconds=0)


def _checked(message) -> CheckedMessage | None:
    attributes = message.attributes
    try:
        partition, offset = int(attributes[PARTITION_ATTRIBUTE]), int(attributes[OFFSET_ATTRIBUTE])
    except (KeyError, ValueError):
        return None
    acked_by = frozenset(k[len(ACKED_PREFIX):] for k in attributes.keys() if k.startswith(ACKED_PREFIX))
    return CheckedMessage(partition, offset, message.ordering_key.encode(), bytes(message.data), acked_by)
