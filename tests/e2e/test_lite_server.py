"""The local Pub/Sub Lite server against the real client library: publisher and subscriber, sync and
async, partition assignment, cursors, seek, flow control, retention and restarts."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from google.api_core import exceptions
from google.cloud.pubsublite.cloudpubsub import (
    AsyncPublisherClient, AsyncSubscriberClient, PublisherClient, SubscriberClient,
)
from google.cloud.pubsublite.types import FlowControlSettings
from google.cloud.pubsublite_v1 import types
from google.protobuf.duration_pb2 import Duration

from connectors.pubsublite.clients import LiteConnection
from tests.e2e.lite_helpers import (
    create_lite_topic, lite_committed, lite_connection, publish_lite, read_lite_partition,
)

pytestmark = pytest.mark.e2e
FLOW = FlowControlSettings(messages_outstanding=1000, bytes_outstanding=10_000_000)


def _kwargs(path):
    return lite_connection().client_kwargs(path.location.region)


@contextlib.contextmanager
def _subscribed(subscription, clients: int = 1) -> Iterator[list[list]]:
    """Messages each of `clients` high-level subscribers got (and acked) while the block runs."""
    got: list[list] = [[] for _ in range(clients)]
    subscribers = [SubscriberClient(**_kwargs(subscription)) for _ in range(clients)]
    futures = []
    for i, subscriber in enumerate(subscribers):
        subscriber.__enter__()

        def callback(message, i=i):
            got[i].append(message)
            message.ack()

        futures.append(subscriber.subscribe(subscription, callback, FLOW))
    try:
        yield got
    finally:
        time.sleep(0.5)  # let acks turn into cursor commits
        for future, subscriber in zip(futures, subscribers):
            future.cancel()
            subscriber.__exit__(None, None, None)


def _wait_for(condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def _receive(subscription, count: int, clients: int = 1) -> list[list]:
    """Messages each of `clients` high-level subscribers got (acked) until `count` arrived in all."""
    with _subscribed(subscription, clients) as got:
        _wait_for(lambda: sum(map(len, got)) >= count)
    return got


def test_sync_clients_publish_receive_and_commit(stack, unique):
    topic, subscription = create_lite_topic(f"srv-sync-{unique}", partitions=3)
    ids = publish_lite(topic, [{"data": f"m{i}".encode(), "ordering_key": f"k{i % 5}", "attributes": {"n": str(i)}}
                               for i in range(100)])
    assert len(set(ids)) == 100
    (received,) = _receive(subscription, 100)
    assert sorted(m.data for m in received) == sorted(f"m{i}".encode() for i in range(100))
    assert all(m.attributes["n"] == m.data.decode()[1:] for m in received)
    assert {m.ordering_key for m in received} == {f"k{i}" for i in range(5)}
    # Acks became commits through StreamingCommitCursor: every partition's cursor is at its head.
    stats = lite_connection().topic_stats_service(topic.location.region)
    heads = {p: stats.compute_head_cursor(request={"topic": str(topic), "partition": p}).head_cursor.offset
             for p in range(3)}
    assert lite_committed(subscription) == heads and sum(heads.values()) == 100


def test_async_clients_publish_and_receive(stack, unique):
    topic, subscription = create_lite_topic(f"srv-async-{unique}", partitions=2)

    async def run() -> list[bytes]:
        async with AsyncPublisherClient(**_kwargs(topic)) as publisher:
            await asyncio.gather(*(publisher.publish(topic, f"a{i}".encode()) for i in range(50)))
        received = []
        async with AsyncSubscriberClient(**_kwargs(subscription)) as subscriber:
            stream = await subscriber.subscribe(subscription, FLOW)
            while len(received) < 50:
                message = await asyncio.wait_for(stream.__anext__(), 30)
                received.append(message.data)
                message.ack()
        return received

    assert sorted(asyncio.run(run())) == sorted(f"a{i}".encode() for i in range(50))


def test_two_subscribers_share_the_partitions(stack, unique):
    topic, subscription = create_lite_topic(f"srv-assign-{unique}", partitions=4)
    with _subscribed(subscription, clients=2) as got:
        # Probes until both subscribers read: the assignment has settled, so no partition changes hands (and
        # redelivers what was read but not yet committed) while the messages below arrive.
        probes = 0
        while not all(got) and probes < 100:
            publish_lite(topic, [{"data": f"probe{probes}".encode(), "ordering_key": f"p{probes}"}])
            probes += 1
            time.sleep(0.2)
        publish_lite(topic, [{"data": f"m{i}".encode(), "ordering_key": f"k{i}"} for i in range(200)])
        _wait_for(lambda: sum(1 for received in got for m in received if m.data.startswith(b"m")) >= 200)
    first, second = ([m for m in received if m.data.startswith(b"m")] for received in got)
    assert sorted(m.data for m in first + second) == sorted(f"m{i}".encode() for i in range(200))
    # Messages of one key come from one partition, so no key reaches both subscribers.
    assert not {m.ordering_key for m in first} & {m.ordering_key for m in second}
    assert first and second


def test_flow_control_seek_and_stats_over_the_raw_stream(stack, unique):
    from google.cloud.pubsublite_v1 import SubscriberServiceClient

    topic, subscription = create_lite_topic(f"srv-flow-{unique}", partitions=1)
    publish_lite(topic, [{"data": f"m{i}".encode()} for i in range(20)])
    client = SubscriberServiceClient(**_kwargs(subscription))
    requests_sent = []

    def requests():
        yield types.SubscribeRequest(initial=types.InitialSubscribeRequest(
            subscription=str(subscription), partition=0,
            initial_location=types.SeekRequest(named_target=types.SeekRequest.NamedTarget.COMMITTED_CURSOR)))
        yield types.SubscribeRequest(flow_control=types.FlowControlRequest(allowed_messages=5, allowed_bytes=10**6))
        while len(requests_sent) < 1:
            time.sleep(0.05)
        yield types.SubscribeRequest(seek=types.SeekRequest(cursor=types.Cursor(offset=15)))
        yield types.SubscribeRequest(flow_control=types.FlowControlRequest(allowed_messages=100, allowed_bytes=10**6))
        time.sleep(5)

    stream = client.subscribe(requests=requests(), timeout=20)
    responses = iter(stream)
    assert next(responses).initial.cursor.offset == 0
    batch = next(responses).messages.messages
    assert [m.cursor.offset for m in batch] == [0, 1, 2, 3, 4]  # exactly the five tokens granted
    requests_sent.append(True)
    assert next(responses).seek.cursor.offset == 15
    after_seek = next(responses).messages.messages
    assert [m.cursor.offset for m in after_seek] == [15, 16, 17, 18, 19]
    stream.cancel()

    stats = lite_connection().topic_stats_service(topic.location.region).compute_message_stats(
        request={"topic": str(topic), "partition": 0, "start_cursor": {"offset": 5}, "end_cursor": {"offset": 10}})
    assert stats.message_count == 5 and stats.message_bytes > 0


def test_seek_subscription_moves_the_committed_cursors_to_the_tail_a_time_or_the_head(stack, unique):
    from datetime import datetime, timezone

    from google.cloud.pubsublite.types import BacklogLocation, MessageMetadata, PublishTime

    topic, subscription = create_lite_topic(f"srv-seek-{unique}", partitions=2)
    publish_lite(topic, [{"data": f"a{i}".encode(), "ordering_key": "k"} for i in range(3)])
    time.sleep(0.05)
    between = datetime.now(timezone.utc)
    time.sleep(0.05)
    ids = publish_lite(topic, [{"data": f"b{i}".encode(), "ordering_key": "k"} for i in range(2)])
    partition = MessageMetadata.decode(ids[0]).partition.value  # one ordering key: one partition
    admin = lite_connection().admin(subscription.location.region)

    def seek(target) -> dict[int, int]:
        operation = admin.seek_subscription(subscription, target)
        operation.result(timeout=10)  # Google's client waits on the long-running operation
        assert operation.metadata.verb == "seek" and operation.metadata.target == str(subscription)
        return lite_committed(subscription)

    assert seek(BacklogLocation.END) == {partition: 5, 1 - partition: 0}
    assert seek(BacklogLocation.BEGINNING) == {partition: 0, 1 - partition: 0}
    assert seek(PublishTime(datetime.now(timezone.utc))) == {partition: 5, 1 - partition: 0}  # none after: the head
    assert seek(PublishTime(between)) == {partition: 3, 1 - partition: 0}
    (received,) = _receive(subscription, 2)
    assert sorted(m.data for m in received) == [b"b0", b"b1"]  # a subscriber starts where the seek put the cursors
    with pytest.raises(exceptions.NotFound, match="not found"):
        admin.seek_subscription(str(subscription) + "-nope", BacklogLocation.END)


def test_errors_name_what_is_wrong(stack, unique):
    topic, subscription = create_lite_topic(f"srv-err-{unique}", partitions=2)
    with pytest.raises(exceptions.AlreadyExists):
        create_lite_topic(f"srv-err-{unique}", partitions=2)
    admin = lite_connection().admin(topic.location.region)
    missing = type(topic)(topic.project, topic.location, f"nope-{unique}")
    with pytest.raises(exceptions.NotFound, match=f"nope-{unique}"):
        admin.get_topic(missing)
    stats = lite_connection().topic_stats_service(topic.location.region)
    with pytest.raises(exceptions.InvalidArgument, match="Partition 5 out of range"):
        stats.compute_head_cursor(request={"topic": str(topic), "partition": 5})
    assert [str(s) for s in admin.list_topic_subscriptions(topic)] == [str(subscription)]
    admin.delete_subscription(subscription)
    admin.delete_topic(topic)
    with pytest.raises(exceptions.NotFound):
        admin.get_topic(topic)


def test_retention_by_bytes_drops_the_oldest(stack, unique):
    topic, subscription = create_lite_topic(f"srv-ret-{unique}", partitions=1, per_partition_bytes=2_000)
    publish_lite(topic, [{"data": b"x" * 100 + str(i).encode()} for i in range(100)])
    # About 2,000 bytes of ~105-byte messages stay: the newest ones, at their original offsets.
    stats = lite_connection().topic_stats_service(topic.location.region).compute_message_stats(
        request={"topic": str(topic), "partition": 0, "start_cursor": {"offset": 0}})
    assert 10 <= stats.message_count < 25 and stats.message_bytes <= 2_000
    kept = read_lite_partition(subscription, 0, stats.message_count)  # from offset 0: starts at the oldest kept
    assert len(kept) == stats.message_count and kept[0].cursor.offset == 100 - stats.message_count
    assert kept[-1].cursor.offset == 99 and kept[-1].message.data.endswith(b"99")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_data_survives_a_restart_and_retention_by_time(stack, tmp_path, unique):
    """A server of its own, stopped and started again on the same data directory."""
    import shutil

    from google.cloud.pubsublite import Topic
    from google.cloud.pubsublite.types import CloudZone, TopicPath

    # gRPC loads its trusted roots once per process: give this server the session server's certificate.
    certificate = stack.lite_certificate()
    shutil.copy(certificate, tmp_path / certificate.name)
    shutil.copy(certificate.with_suffix(".key"), tmp_path / certificate.with_suffix(".key").name)
    port = _free_port()
    command = [sys.executable, "-m", "local_stack.lite_server", "--port", str(port), "--data", str(tmp_path)]

    def start() -> subprocess.Popen:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        return server

    server = start()
    try:
        connection = LiteConnection(api_endpoint=f"127.0.0.1:{port}", ca_file=str(certificate))
        zone = CloudZone.parse("us-central1-a")
        kept = TopicPath("p", zone, "kept")
        aging = TopicPath("p", zone, "aging")
        admin = connection.admin(zone.region)
        for path, period in ((kept, None), (aging, Duration(seconds=2))):
            retention = Topic.RetentionConfig(per_partition_bytes=10**9, period=period)
            admin.create_topic(Topic(name=str(path), partition_config=Topic.PartitionConfig(count=1),
                                     retention_config=retention))
        for path in (kept, aging):
            with PublisherClient(**connection.client_kwargs(zone.region)) as publisher:
                [f.result() for f in [publisher.publish(path, f"d{i}".encode()) for i in range(10)]]
        server.terminate()
        server.wait(10)
        server = start()
        stats = connection.topic_stats_service(zone.region)
        assert stats.compute_head_cursor(request={"topic": str(kept), "partition": 0}).head_cursor.offset == 10
        time.sleep(3.5)  # past the 2 s retention period of `aging`
        count = lambda path: stats.compute_message_stats(
            request={"topic": str(path), "partition": 0, "start_cursor": {"offset": 0}}).message_count
        assert count(kept) == 10 and count(aging) == 0
        assert stats.compute_head_cursor(request={"topic": str(aging), "partition": 0}).head_cursor.offset == 10
    finally:
        server.terminate()
        server.wait(10)
