"""The raw-request publisher against a scripted in-process Publish service: batching, per-key order,
retries of transient errors, one-message retries after a rejected request, failures that end the task."""

import threading
import time
from concurrent import futures

import grpc
import pytest
from google.pubsub_v1.types import PublishRequest, PublishResponse, PubsubMessage

from connectors.cloud_pubsub.request_publisher import PublishFailed, PublishSettings, RequestPublisher
from connectors.errors import DeliveryAbandoned

TOPIC = "projects/p/topics/t"


class ScriptedPublisher:
    """Accepts requests unless a message's data says otherwise: b"bad" makes the whole request
    INVALID_ARGUMENT, b"flaky" fails once with UNAVAILABLE, b"gone" gives NOT_FOUND."""

    def __init__(self):
        self.received: list[list[bytes]] = []
        self.ordering_keys: list[str] = []
        self.concurrent_per_key: dict[str, int] = {}
        self.max_concurrent_per_key = 0
        self.in_flight = self.max_in_flight = 0  # requests being answered at once, of any key
        self.flaky_seen = False
        self.answer_after_s = 0.002
        self.lock = threading.Lock()

    def publish(self, request, context):
        data = [m.data for m in request.messages]
        keys = {m.ordering_key for m in request.messages}
        assert len(keys) == 1, "one ordering key per request"
        key = keys.pop()
        with self.lock:
            self.concurrent_per_key[key] = self.concurrent_per_key.get(key, 0) + 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if key:
                self.max_concurrent_per_key = max(self.max_concurrent_per_key, self.concurrent_per_key[key])
        time.sleep(self.answer_after_s)
        with self.lock:
            self.concurrent_per_key[key] -= 1
            self.in_flight -= 1
            if b"gone" in data:
                context.abort(grpc.StatusCode.NOT_FOUND, "topic gone")
            if b"flaky" in data and not self.flaky_seen:
                self.flaky_seen = True
                context.abort(grpc.StatusCode.UNAVAILABLE, "try again")
            if b"bad" in data:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad message")
            self.received.append(data)
            self.ordering_keys.append(key)
        return PublishResponse.pb()(message_ids=[str(i) for i in range(len(data))])


@pytest.fixture
def service():
    scripted = ScriptedPublisher()
    server = grpc.server(futures.ThreadPoolExecutor(8))
    handler = grpc.method_handlers_generic_handler("google.pubsub.v1.Publisher", {
        "Publish": grpc.unary_unary_rpc_method_handler(
            scripted.publish, request_deserializer=PublishRequest.pb().FromString,
            response_serializer=lambda r: r.SerializeToString())})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield scripted, channel
    channel.close()
    server.stop(0)


def _settings(**overrides) -> PublishSettings:
    base = dict(max_messages=10, max_bytes=9_500_000, delay_s=0.05, request_timeout_s=5, total_timeout_s=10,
                max_outstanding_messages=50, max_outstanding_bytes=1 << 20, max_in_flight_requests=4)
    return PublishSettings(**{**base, **overrides})


def _publish(channel, items, **settings):
    acked, rejected = [], []
    publisher = RequestPublisher(channel, TOPIC, _settings(**settings), acked.extend,
                                 lambda origin, message, error: rejected.append((origin, str(error))))
    for origin, (data, key) in enumerate(items):
        publisher.add(PubsubMessage.pb()(data=data, ordering_key=key), len(data), origin, key)
    publisher.close(10)
    return publisher, acked, rejected


def test_requests_are_sealed_by_count_and_every_message_is_acknowledged(service):
    scripted, channel = service
    _, acked, rejected = _publish(channel, [(b"m%d" % i, "") for i in range(95)])
    assert sorted(acked) == list(range(95)) and rejected == []
    assert sorted(len(r) for r in scripted.received) == [5] + [10] * 9


def test_a_key_has_one_request_out_at_a_time_in_order(service):
    scripted, channel = service
    items = [(b"%s-%d" % (k.encode(), i), k) for i in range(60) for k in ("a", "b")]
    _publish(channel, items, max_messages=3)
    assert scripted.max_concurrent_per_key == 1
    for key in ("a", "b"):
        delivered = [d for r, k in zip(scripted.received, scripted.ordering_keys) if k == key for d in r]
        assert delivered == [d for d, k in items if k == key]


def test_transient_errors_are_retried(service):
    scripted, channel = service
    _, acked, _ = _publish(channel, [(b"x", ""), (b"flaky", ""), (b"y", "")], max_messages=1)
    assert scripted.flaky_seen and sorted(acked) == [0, 1, 2]


def test_a_rejected_request_is_retried_message_by_message_and_its_key_goes_on(service):
    scripted, channel = service
    items = [(b"k1", "k"), (b"bad", "k"), (b"k2", "k"), (b"k3", "k")]
    publisher, acked, rejected = _publish(channel, items, max_messages=3)
    assert [origin for origin, _ in rejected] == [1] and "INVALID_ARGUMENT" in rejected[0][1]
    assert sorted(acked) == [0, 2, 3]
    assert [d for r in scripted.received for d in r] == [b"k1", b"k2", b"k3"]  # order kept around the bad one


def test_a_permanent_failure_ends_the_task_naming_its_messages(service):
    _, channel = service
    with pytest.raises(PublishFailed, match="NOT_FOUND") as failure:
        _publish(channel, [(b"ok", ""), (b"gone", "")], max_messages=1)
    assert failure.value.origins == [1]


def test_requests_at_the_threshold_are_gzipped(service):
    scripted, channel = service
    publisher, acked, _ = _publish(channel, [(b"z" * 2000, ""), (b"s", "")], max_messages=1,
                                   compression_threshold=1000)
    assert publisher.compressed_requests == 1 and sorted(acked) == [0, 1]


def _publish_encoded(channel, batches: list[list[bytes]], **settings):
    """Each batch's messages (data only) encoded at once, its origin its index in `batches`."""
    import pyarrow as pa

    from connectors.cloud_pubsub.request_publisher import RowRun
    from connectors.cloud_pubsub.wire import encode_messages

    acked, rejected = [], []
    publisher = RequestPublisher(channel, TOPIC, _settings(**settings), acked.extend,
                                 lambda origin, message, error: rejected.append((origin, message.data)))
    for index, values in enumerate(batches):
        publisher.add_encoded(encode_messages(pa.array(values, pa.binary())), index)
    publisher.close(10)
    # Acknowledged encoded requests name their rows as runs; a message retried alone, as (origin, row).
    return [row for origin in acked for row in (origin.rows() if isinstance(origin, RowRun) else [origin])], rejected


def test_encoded_batches_make_the_requests_add_would(service):
    scripted, channel = service
    batches = [[b"a%d" % i for i in range(23)], [b"b%d" % i for i in range(14)]]
    acked, rejected = _publish_encoded(channel, batches)
    assert sorted(acked) == sorted((b, r) for b, values in enumerate(batches) for r in range(len(values)))
    assert rejected == []
    # 10 a request, the first batch's last three topped up by the second's first seven (requests without an
    # ordering key may complete in any order).
    assert sorted(r[0] for r in scripted.received) == [b"a0", b"a10", b"a20", b"b7"]
    assert sorted(len(r) for r in scripted.received) == [7, 10, 10, 10]


def test_encoded_requests_keep_to_max_bytes_and_a_large_message_goes_alone(service):
    scripted, channel = service
    # As add() counts them, 15 bytes a small message (10 + 5 of framing), 105 the large one; max 60 bytes.
    acked, _ = _publish_encoded(channel, [[b"x" * 10] * 6 + [b"y" * 100] + [b"z" * 10] * 2], max_bytes=60)
    assert sorted((len(r), r[0][:1]) for r in scripted.received) == [(1, b"y"), (2, b"x"), (2, b"z"), (4, b"x")]
    assert len(acked) == 9


def test_a_rejected_encoded_request_is_retried_message_by_message(service):
    scripted, channel = service
    acked, rejected = _publish_encoded(channel, [[b"k1", b"bad", b"k2"]], max_messages=3)
    assert rejected == [((0, 1), b"bad")]
    assert sorted(acked) == [(0, 0), (0, 2)]
    assert sorted(d for r in scripted.received for d in r) == [b"k1", b"k2"]


def test_encoded_batches_keep_to_the_flow_control_limits(service):
    scripted, channel = service
    batch = [[b"m%d" % i for i in range(40)]]
    acked, _ = _publish_encoded(channel, batch, max_messages=2, max_outstanding_messages=3)
    assert len(acked) == 40
    # At most two requests of two messages out at once: the limit (3) is passed only by the request crossing it.
    limited, scripted.max_in_flight = scripted.max_in_flight, 0
    _publish_encoded(channel, batch, max_messages=2, max_outstanding_messages=1_000)
    assert limited <= 2 < scripted.max_in_flight  # without the limit, the in-flight cap (4) is what holds


@pytest.mark.parametrize("waiting_in", ["add", "close"])
def test_a_wait_for_acknowledgments_told_to_stop_drops_what_is_not_sent(service, waiting_in):
    """A killed run's batch: its lease lapses while the task waits on Pub/Sub (flow control in add(), or close()).
    The wait ends within a look, and nothing queued behind the requests in flight is sent."""
    scripted, channel = service
    scripted.answer_after_s = 0.1
    stop_at = time.monotonic() + 0.25
    publisher = RequestPublisher(channel, TOPIC, _settings(max_outstanding_messages=1000 if waiting_in == "close" else 20,
                                                           max_in_flight_requests=1), lambda origins: None,
                                 lambda origin, message, error: None, keep_going=lambda: time.monotonic() < stop_at)
    with pytest.raises(DeliveryAbandoned, match="stopped with .* messages not acknowledged"):
        for i in range(200):
            publisher.add(PubsubMessage.pb()(data=b"m%d" % i), 2, i)
        publisher.close(10)
    stopped_after_s = time.monotonic() - stop_at
    # A look is KEEP_GOING_LOOK_S; sending the rest, 10 messages a request, one in flight, would take 2 s.
    assert stopped_after_s < 0.5, stopped_after_s
    time.sleep(0.3)  # the request in flight at the stop is answered; nothing is sent after it
    assert 1 <= len(scripted.received) < 10, len(scripted.received)
