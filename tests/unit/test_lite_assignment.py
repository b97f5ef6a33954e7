"""The local Lite server's partition assignment: an even share, and a partition handed over only once released."""

import pytest
from google.cloud.pubsublite_v1 import types

from local_stack.lite_server.service import AssignmentGroups
from tests.unit.lite_store import PARENT, store_with_topic

SUBSCRIPTION = f"{PARENT}/subscriptions/s"


@pytest.fixture
def groups(tmp_path):
    store = store_with_topic(tmp_path, 4)
    subscription = types.Subscription.pb()(topic=f"{PARENT}/topics/t")
    store.create_subscription(PARENT, "s", subscription, skip_backlog=False)
    return AssignmentGroups(store)


def sent(member) -> list[tuple]:
    out = []
    while not member.queue.empty():
        out.append(member.queue.get_nowait())
    return out


def test_a_joining_member_gets_partitions_only_after_their_holder_released_them(groups):
    first = groups.join(SUBSCRIPTION, b"a")
    assert sent(first) == [(0, 1, 2, 3)]
    groups.ack(SUBSCRIPTION, first)
    second = groups.join(SUBSCRIPTION, b"b")
    assert sent(first) == [(0, 2)]
    assert sent(second) == [()]  # 1 and 3 are still read by the first until it acks giving them up
    groups.ack(SUBSCRIPTION, second)
    assert sent(second) == []
    groups.ack(SUBSCRIPTION, first)
    assert sent(second) == [(1, 3)]
    groups.ack(SUBSCRIPTION, second)
    assert sent(first) == [] and sent(second) == []


def test_a_leaving_member_releases_its_partitions_at_once(groups):
    first, second = groups.join(SUBSCRIPTION, b"a"), groups.join(SUBSCRIPTION, b"b")
    groups.ack(SUBSCRIPTION, first)
    groups.ack(SUBSCRIPTION, second)
    groups.ack(SUBSCRIPTION, first)
    sent(first), sent(second)
    assert (first.current, second.current) == ((0, 2), (1, 3))
    groups.leave(SUBSCRIPTION, b"b")
    assert sent(first) == [(0, 1, 2, 3)]


def test_an_assignment_waits_for_the_ack_of_the_last(groups):
    first = groups.join(SUBSCRIPTION, b"a")
    second = groups.join(SUBSCRIPTION, b"b")  # before the first acked its whole set
    assert sent(first) == [(0, 1, 2, 3)] and sent(second) == [()]
    groups.ack(SUBSCRIPTION, first)
    assert sent(first) == [(0, 2)]
    groups.ack(SUBSCRIPTION, second)
    assert sent(second) == []  # the first still holds 1 and 3
    groups.ack(SUBSCRIPTION, first)
    assert sent(second) == [(1, 3)]
