"""The stack's Pub/Sub emulator (Google's pstest with our seek and snapshots) against Google's client: a seek to a
time redelivers exactly the messages published since, acked ones only where the subscription retains them; a
snapshot keeps what was unacked when it was taken, and a seek to it brings that back."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1

from tests.e2e.helpers import PROJECT, drain

pytestmark = pytest.mark.e2e


def _topic_with_subscriptions(name: str) -> tuple[str, str, str]:
    """A topic with two subscriptions, one retaining acked messages; (topic, retaining, plain) paths."""
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(PROJECT, name)
    publisher.create_topic(name=topic)
    retaining, plain = (subscriber.subscription_path(PROJECT, f"{name}-{kind}") for kind in ("retaining", "plain"))
    subscriber.create_subscription(request={"name": retaining, "topic": topic, "retain_acked_messages": True})
    subscriber.create_subscription(request={"name": plain, "topic": topic})
    return topic, retaining, plain


def _publish(topic: str, values: list[str]) -> None:
    publisher = pubsub_v1.PublisherClient()
    for future in [publisher.publish(topic, value.encode()) for value in values]:
        future.result(30)


def _values(subscription: str) -> list[str]:
    return sorted(m.data.decode() for m in drain(subscription))


def test_a_seek_to_a_time_redelivers_exactly_what_was_published_since(stack, unique):
    topic, retaining, plain = _topic_with_subscriptions(f"seek-time-{unique}")
    _, other, _ = _topic_with_subscriptions(f"seek-other-{unique}")
    _publish(topic, [f"old-{i}" for i in range(5)])
    time.sleep(0.2)
    since = datetime.now(timezone.utc)
    time.sleep(0.2)
    _publish(topic, [f"new-{i}" for i in range(5)])
    assert len(_values(retaining)) == len(_values(plain)) == 10

    subscriber = pubsub_v1.SubscriberClient()
    for subscription in (retaining, plain, other):
        subscriber.seek(request={"subscription": subscription, "time": since})
    new = [f"new-{i}" for i in range(5)]
    assert _values(retaining) == new  # with their data and attributes, of this topic only
    assert _values(plain) == []  # acked messages are not kept, so nothing comes back
    assert _values(other) == []

    _publish(topic, ["late"])
    subscriber.seek(request={"subscription": retaining, "time": datetime.now(timezone.utc)})
    assert _values(retaining) == []  # a seek to now acks what was unacked


def test_a_snapshot_keeps_the_unacked_messages_and_a_seek_to_it_brings_them_back(stack, unique):
    topic, retaining, plain = _topic_with_subscriptions(f"snap-{unique}")
    _publish(topic, [f"a-{i}" for i in range(4)])
    subscriber = pubsub_v1.SubscriberClient()
    snapshot = subscriber.snapshot_path(PROJECT, f"snap-{unique}")
    taken = subscriber.create_snapshot(request={"name": snapshot, "subscription": plain, "labels": {"by": "test"}})
    assert (taken.topic, dict(taken.labels)) == (topic, {"by": "test"})
    assert snapshot in [s.name for s in subscriber.list_snapshots(request={"project": f"projects/{PROJECT}"})]
    assert len(_values(plain)) == 4
    _publish(topic, ["after"])
    assert _values(plain) == ["after"]

    subscriber.seek(request={"subscription": plain, "snapshot": snapshot})
    assert _values(plain) == sorted([f"a-{i}" for i in range(4)] + ["after"])  # and what came after it
    with pytest.raises(exceptions.AlreadyExists):
        subscriber.create_snapshot(request={"name": snapshot, "subscription": plain})
    subscriber.delete_snapshot(request={"snapshot": snapshot})
    with pytest.raises(exceptions.NotFound):
        subscriber.seek(request={"subscription": plain, "snapshot": snapshot})
