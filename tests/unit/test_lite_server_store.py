"""The local Lite server's store: idempotent publishing, offsets and retention."""

import grpc
import pytest
from google.cloud.pubsublite_v1 import types

from local_stack.lite_server.store import LiteError, LiteStore
from tests.unit.lite_store import PARENT, store_with_topic


@pytest.fixture
def store(tmp_path):
    return store_with_topic(tmp_path, 2)


def messages(*datas):
    return [types.PubSubMessage.pb()(data=d) for d in datas]


def test_out_of_order_batches_of_one_client_all_land_and_retries_do_not(store):
    topic = f"{PARENT}/topics/t"
    assert store.publish(topic, 0, messages(b"a", b"b"), b"client", 0) == [(0, 2, 0)]
    assert store.publish(topic, 0, messages(b"e", b"f"), b"client", 4) == [(0, 2, 2)]
    assert store.publish(topic, 0, messages(b"c", b"d"), b"client", 2) == [(0, 2, 4)]  # late, not a duplicate
    assert store.publish(topic, 0, messages(b"f", b"g"), b"client", 5) == [(1, 2, 6)]  # a retry: only g is new
    assert [m.message.data for m in store.log(topic, 0).messages] == [b"a", b"b", b"e", b"f", b"c", b"d", b"g"]


def test_a_resend_without_sequence_numbers_is_kept(store):
    topic = f"{PARENT}/topics/t"
    store.publish(topic, 1, messages(b"a"), b"client", 0)
    store.publish(topic, 1, messages(b"b"), b"client", 1)
    # The client resends outstanding batches after a reconnect without a sequence number.
    assert store.publish(topic, 1, messages(b"b"), b"client", 0) == [(0, 1, 2)]


def test_state_survives_reopening(store, tmp_path):
    topic = f"{PARENT}/topics/t"
    store.publish(topic, 0, messages(b"a", b"b"), b"", 0)
    subscription = types.Subscription.pb()(topic=topic)
    store.create_subscription(PARENT, "s", subscription, skip_backlog=True)
    store.commit_cursor(f"{PARENT}/subscriptions/s", 1, 0)
    again = LiteStore(tmp_path / "lite.sqlite")
    assert again.log(topic, 0).head == 2
    assert again.committed_cursor(f"{PARENT}/subscriptions/s", 0) == 2  # skip_backlog started at the head
    assert again.topic(topic).partition_config.count == 2


def test_partition_count_only_grows(store):
    topic = types.Topic.pb()(name=f"{PARENT}/topics/t")
    topic.partition_config.count = 1
    with pytest.raises(LiteError) as error:
        store.update_topic(topic, ["partition_config.count"])
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    topic.partition_config.count = 3
    store.update_topic(topic, ["partition_config.count"])
    assert store.log(topic.name, 2).head == 0


def test_a_resend_after_a_restart_is_not_stored_twice(store, tmp_path):
    topic = f"{PARENT}/topics/t"
    store.publish(topic, 0, messages(b"a", b"b"), b"client", 0)
    store.publish(topic, 0, messages(b"c"), b"client", 2)
    again = LiteStore(tmp_path / "lite.sqlite")  # the server restarted; the client resends what it had out
    assert again.publish(topic, 0, messages(b"b", b"c", b"d"), b"client", 1) == [(2, 3, 3)]
    assert [m.message.data for m in again.log(topic, 0).messages] == [b"a", b"b", b"c", b"d"]
