"""The benchmarks' counting Pub/Sub endpoint (bench/pubsub_counter) against Google's client: Publish answers with ids
and counts messages and bytes; a preloaded subscription serves that many messages over Pull and StreamingPull (the
client's flow control kept), and counts the acks, which the client sends as unary calls."""

from __future__ import annotations

import time

import pytest

from bench.pubsub_counter import flood, running_counter

pytestmark = pytest.mark.e2e


@pytest.fixture
def counter(monkeypatch):
    with running_counter() as running:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", running.endpoint)
        yield running


def test_publish_is_counted_and_answered_with_ids(counter):
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=500, max_latency=0.01))
    topic = publisher.topic_path("bench", "counted")
    started = time.time()
    ids = [future.result(30) for future in [publisher.publish(topic, b"x" * 100) for _ in range(2000)]]
    answered = time.time()
    assert len(set(ids)) == 2000
    published = counter.stats()["published"]
    assert (published["messages"], published["bytes"]) == (2000, 200_000)
    assert sum(published["per_second"].values()) == 2000
    assert started <= published["last_unix_ns"] / 1e9 <= answered  # the last Publish's time, on this machine's clock
    counter.reset()
    assert counter.stats()["published"]["messages"] == 0 and counter.stats()["published"]["last_unix_ns"] == 0


def test_a_preloaded_subscription_serves_exactly_its_messages_over_pull_and_streaming_pull(counter):
    from google.cloud import pubsub_v1

    subscription = "projects/bench/subscriptions/served"
    counter.preload(subscription, 3000, 1024)
    subscriber = pubsub_v1.SubscriberClient()
    pulled = subscriber.pull(subscription=subscription, max_messages=500).received_messages
    assert len(pulled) == 500 and all(len(m.message.data) == 1024 for m in pulled)
    subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in pulled])

    got = []

    def received(message) -> None:
        got.append(message.message_id)
        message.ack()

    streaming = subscriber.subscribe(subscription, received,
                                     flow_control=pubsub_v1.types.FlowControl(max_messages=200))
    deadline = time.monotonic() + 60
    while len(got) < 2500 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)  # the last acks
    streaming.cancel()
    assert len(got) == len(set(got)) == 2500
    assert not set(got) & {m.message.message_id for m in pulled}
    served = counter.stats()["subscriptions"][subscription]
    assert (served["left"], served["served"], served["acked"]) == (0, 3000, 3000)
    with pytest.raises(Exception, match="preload it first"):
        subscriber.pull(subscription="projects/bench/subscriptions/unknown", max_messages=1)


def test_the_flood_client_sends_what_it_says_and_the_endpoint_counts_it(counter):
    sent = flood(counter, 20_000, 512)
    assert (sent["messages"], sent["bytes"]) == (20_000, 20_000 * 512) and sent["seconds"] > 0
    published = counter.stats()["published"]
    assert (published["messages"], published["bytes"]) == (20_000, 20_000 * 512)
