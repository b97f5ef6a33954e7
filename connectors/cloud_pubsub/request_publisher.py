"""Pub/Sub publish requests built from raw protobufs and sent on one gRPC channel, several in flight.

Why not the client library's PublisherClient: its publish() wraps every message in proto-plus and
gives it a future, a lock and a batch thread; that was half of a sink task's time (README, profile).
Here a message is one upb protobuf (about 3 us to build; a hand-written wire encoder measured only
25 % faster, not worth owning), requests are sealed by the seed's batching keys, and completions come
back from gRPC's own thread through a queue, so the task's thread never waits on a lock per message.

Kept from the client library: one ordering key per request and, per key, one request at a time, in
order; transient errors retried with exponential backoff (google.api_core's sleep generator) within
the total timeout; a per-request deadline; gzip at the compression threshold. Added: a request that
Pub/Sub rejects as a whole is retried one message at a time, so only the bad message is reported
(and its key goes on, where the client library would pause it for ever).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import grpc
import numpy as np
from google.api_core.retry import exponential_sleep_generator
from google.pubsub_v1.types import PublishRequest, PublishResponse

from connectors.cloud_pubsub.wire import EncodedMessages, field_bytes
from connectors.errors import KEEP_GOING_LOOK_S, DeliveryAbandoned

PUBLISH_METHOD = "/google.pubsub.v1.Publisher/Publish"
TRANSIENT = frozenset({
    grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN,
})
# Pub/Sub rejects the whole request for one bad message with these: each message gets its own try.
REJECTED = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION})
# What a server that is down or silent gives: retried only up to the outage timeout.
UNANSWERED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
REQUEST_OVERHEAD_BYTES = 5  # the tag and length prefix of one message inside a PublishRequest


@dataclass(frozen=True)
class PublishSettings:
    max_messages: int            # maxBufferSize
    max_bytes: int               # maxBufferBytes
    delay_s: float               # maxDelayThresholdMs: an open request is sealed this long after its first message
    request_timeout_s: float     # maxRequestTimeoutMs, per attempt
    total_timeout_s: float       # maxTotalTimeoutMs, over all attempts of a request
    max_outstanding_messages: int  # sealed but not yet acknowledged; add() waits above it
    max_outstanding_bytes: int
    max_in_flight_requests: int = 8
    compression_threshold: int | None = None  # gzip requests of at least this many bytes
    # A Pub/Sub that does not answer (UNAVAILABLE, DEADLINE_EXCEEDED) is retried this long at most, when
    # it is shorter than total_timeout_s: the bridge's outage timeout.
    unanswered_timeout_s: float | None = None


class PublishFailed(RuntimeError):
    """A request failed for good (not transient, or past the total timeout). `unanswered`: Pub/Sub did not
    answer it for as long as the settings allow."""

    def __init__(self, message: str, origins: list, unanswered: bool = False):
        super().__init__(message)
        self.origins = origins
        self.unanswered = unanswered


class PublishRejected(RuntimeError):
    """Pub/Sub refused this one message (INVALID_ARGUMENT or FAILED_PRECONDITION)."""


class RowRun(NamedTuple):
    """The origins of `count` encoded messages: rows first, first + 1, ... of `origin` (add_encoded's)."""

    origin: Any
    first: int
    count: int

    def rows(self) -> list[tuple[Any, int]]:
        """One origin per message, as add() takes them: (origin, row)."""
        return [(self.origin, row) for row in range(self.first, self.first + self.count)]


@dataclass
class _Request:
    """Built messages (add(): `messages`, one origin each) or encoded ones (add_encoded(): `chunks` of entries
    back to back, one RowRun per chunk in `origins`), never both."""

    ordering_key: str
    opened: float
    messages: list = field(default_factory=list)
    origins: list = field(default_factory=list)
    size: int = 0
    count: int = 0
    chunks: list = field(default_factory=list)
    alone: bool = False          # a single message retried after its request was rejected
    first_sent: float = 0.0
    backoff: Any = None


class RequestPublisher:
    """Call add() per message and close() once; on_acked gets the origins of each acknowledged request,
    on_rejected the origin, message and error of each message Pub/Sub refused on its own. `keep_going`, asked while
    add() or close() waits for acknowledgments: once it says no, what is not sent yet is dropped and the wait ends
    in DeliveryAbandoned (a killed run's batch stops without sending its queue)."""

    def __init__(self, channel: grpc.Channel, topic: str, settings: PublishSettings,
                 on_acked: Callable[[list], None], on_rejected: Callable[[Any, Any, Exception], None],
                 keep_going: Callable[[], bool] | None = None):
        self._call = channel.unary_unary(PUBLISH_METHOD, request_serializer=None,
                                         response_deserializer=PublishResponse.pb().FromString)
        self._topic = topic
        self._metadata = (("x-goog-request-params", f"topic={topic}"),)
        self._settings = settings
        self._on_acked = on_acked
        self._on_rejected = on_rejected
        self._keep_going = keep_going
        self._request_pb = PublishRequest.pb()
        self._topic_field = field_bytes(1, topic.encode())  # an encoded request's first bytes
        self._open: dict[str, _Request] = {}               # by ordering key, oldest first
        self._ready: collections.deque[_Request] = collections.deque()
        self._waiting_for_key: dict[str, collections.deque[_Request]] = {}  # keys with a request out
        self._retries: list = []                           # heap of (due, seq, request)
        self._seq = itertools.count()
        self._completed: queue.SimpleQueue = queue.SimpleQueue()
        self._in_flight = 0
        self._outstanding_messages = 0
        self._outstanding_bytes = 0
        self.compressed_requests = 0
        self.requests_sent = 0

    # --- the task's side ------------------------------------------------------------------------
    def add(self, message, size: int, origin: Any, ordering_key: str = "") -> None:
        size += REQUEST_OVERHEAD_BYTES
        s = self._settings
        request = self._open.get(ordering_key)
        if request is not None and (request.count >= s.max_messages or request.size + size > s.max_bytes
                                    or request.chunks):
            self._seal(self._open.pop(ordering_key))
            request = None
        now = time.monotonic()
        if request is None:
            request = self._open[ordering_key] = _Request(ordering_key, now)
        request.messages.append(message)
        request.origins.append(origin)
        request.size += size
        request.count += 1
        if request.count >= s.max_messages:
            self._seal(self._open.pop(ordering_key))
        self._after_add(now)

    def add_encoded(self, encoded: EncodedMessages, origin: Any) -> None:
        """Every message of `encoded` (without an ordering key), in order: the same requests add() would make,
        with no Python work per message. Acknowledged and rejected messages are reported as RowRun(origin, ...)
        and (origin, row)."""
        s = self._settings
        counted = np.zeros(len(encoded) + 1, np.int64)  # bytes as add() counts them, summed over the rows
        np.cumsum(encoded.sizes + REQUEST_OVERHEAD_BYTES, out=counted[1:])
        now = time.monotonic()
        request = self._open.get("")
        if request is not None and request.messages:
            self._seal(self._open.pop(""))
            request = None
        start = 0
        while start < len(encoded):
            if request is None:
                request = self._open[""] = _Request("", now)
            # The rows that fit what the request has room for; a message larger than max_bytes goes alone.
            by_bytes = int(np.searchsorted(counted, counted[start] + s.max_bytes - request.size, side="right")) - 1
            stop = min(start + s.max_messages - request.count, len(encoded), by_bytes)
            if stop <= start:
                if request.count:
                    self._seal(self._open.pop(""))
                    self._wait_for_room()
                    request = None
                    continue
                stop = start + 1
            request.chunks.append(encoded.chunk(start, stop))
            request.origins.append(RowRun(origin, start, stop - start))
            request.count += stop - start
            request.size += int(counted[stop] - counted[start])
            if stop < len(encoded) or request.count >= s.max_messages:  # full: what comes next does not fit
                self._seal(self._open.pop(""))
                self._wait_for_room()  # flow control as add() keeps it, a request at a time
                request = None
            start = stop
        self._after_add(now)

    def _after_add(self, now: float) -> None:
        self._seal_expired(now)
        self._wait_for_room()

    def _wait_for_room(self) -> None:
        """Send what may go; then, while more is sealed and unacknowledged than the flow-control limits, wait."""
        s = self._settings
        self._progress(block=False)
        while (self._outstanding_messages > s.max_outstanding_messages
               or self._outstanding_bytes > s.max_outstanding_bytes):
            self._wait_a_while()

    def _wait_a_while(self, until: float | None = None) -> None:
        """Handle completions, waiting for one (or `until`); then ask `keep_going`, when there is one."""
        if self._keep_going is None:
            self._progress(block=True, until=until)
            return
        look = time.monotonic() + KEEP_GOING_LOOK_S
        self._progress(block=True, until=look if until is None else min(until, look))
        if not self._keep_going():
            self._abandon()

    def _abandon(self) -> None:
        """Drop what is not sent; what is in flight ends on its own (its completions are not waited for)."""
        dropped = self._outstanding_messages
        self._open.clear()
        self._ready.clear()
        self._waiting_for_key.clear()
        self._retries.clear()
        self._outstanding_messages = self._outstanding_bytes = 0
        raise DeliveryAbandoned(f"publishing to {self._topic} stopped with {dropped} messages not acknowledged")

    def close(self, timeout_s: float) -> None:
        """Seal what is open and wait for every request; raise PublishFailed or TimeoutError."""
        while self._open:
            self._seal(self._open.pop(next(iter(self._open))))
        deadline = time.monotonic() + timeout_s
        while self._outstanding_messages:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self._outstanding_messages} messages to {self._topic} were not acknowledged "
                                   f"within the shutdown timeout ({timeout_s:.0f} s)")
            self._wait_a_while(until=deadline)

    # --- sealing and sending --------------------------------------------------------------------
    def _seal_expired(self, now: float) -> None:
        delay = self._settings.delay_s
        while self._open:
            key, request = next(iter(self._open.items()))
            if now - request.opened < delay:
                return
            self._seal(self._open.pop(key))

    def _seal(self, request: _Request) -> None:
        self._outstanding_messages += request.count
        self._outstanding_bytes += request.size
        self._queue(request)

    def _queue(self, request: _Request) -> None:
        """Unordered requests go straight to the ready queue; a key has one request out at a time."""
        key = request.ordering_key
        if not key:
            self._ready.append(request)
        elif key in self._waiting_for_key:
            self._waiting_for_key[key].append(request)
        else:
            self._waiting_for_key[key] = collections.deque()
            self._ready.append(request)

    def _key_done(self, key: str) -> None:
        if not key:
            return
        waiting = self._waiting_for_key[key]
        if waiting:
            self._ready.append(waiting.popleft())
        else:
            del self._waiting_for_key[key]

    def _send(self, request: _Request) -> None:
        s = self._settings
        if not request.first_sent:
            request.first_sent = time.monotonic()
        if request.chunks:
            body = b"".join([self._topic_field, *request.chunks])
        else:
            body = self._request_pb(topic=self._topic, messages=request.messages).SerializeToString()
        compression = grpc.Compression.NoCompression
        if s.compression_threshold is not None and len(body) >= s.compression_threshold:
            compression = grpc.Compression.Gzip
            self.compressed_requests += 1
        future = self._call.future(body, timeout=s.request_timeout_s, metadata=self._metadata,
                                   compression=compression)
        self._in_flight += 1
        self.requests_sent += 1
        future.add_done_callback(lambda f, r=request: self._completed.put((r, f)))

    def _progress(self, block: bool, until: float | None = None) -> None:
        """Send what may go, then handle completions (waiting for one if `block`)."""
        now = time.monotonic()
        while self._retries and self._retries[0][0] <= now:
            self._ready.appendleft(heapq.heappop(self._retries)[2])
        self._send_ready()
        if block:
            wake = [t for t in (until, self._retries[0][0] if self._retries else None,
                                next(iter(self._open.values())).opened + self._settings.delay_s if self._open else None)
                    if t is not None]
            timeout = max(min(wake) - now, 0.0) if wake else None
            try:
                self._handle(*self._completed.get(timeout=timeout))
            except queue.Empty:
                self._seal_expired(time.monotonic())
        while True:
            try:
                request, future = self._completed.get_nowait()
            except queue.Empty:
                break
            self._handle(request, future)
        self._send_ready()

    def _send_ready(self) -> None:
        while self._ready and self._in_flight < self._settings.max_in_flight_requests:
            self._send(self._ready.popleft())

    # --- completions ----------------------------------------------------------------------------
    def _handle(self, request: _Request, future: grpc.Future) -> None:
        self._in_flight -= 1
        error = future.exception()
        if error is None:
            self._settle(request)
            self._on_acked(request.origins)
            self._key_done(request.ordering_key)
            return
        code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
        detail = error.details() if isinstance(error, grpc.Call) else str(error)
        elapsed = time.monotonic() - request.first_sent
        budget = self._settings.total_timeout_s
        unanswered = code in UNANSWERED and self._settings.unanswered_timeout_s is not None
        if unanswered:
            budget = min(budget, self._settings.unanswered_timeout_s)
        if code in TRANSIENT and elapsed < budget:
            if request.backoff is None:
                request.backoff = exponential_sleep_generator(0.1, 60.0, 1.3)
            delay = min(next(request.backoff), max(budget - elapsed, 0.0))
            heapq.heappush(self._retries, (time.monotonic() + delay, next(self._seq), request))
            return
        if code in REJECTED and request.alone:
            self._settle(request)
            self._on_rejected(request.origins[0], request.messages[0], PublishRejected(f"{code.name}: {detail}"))
            self._key_done(request.ordering_key)
            return
        if code in REJECTED:
            # Give each message its own request, in order, ahead of the key's later requests.
            self._settle(request)
            size = request.size // request.count
            messages, origins = request.messages, request.origins
            if request.chunks:  # encoded: its messages back as protobufs, one origin each
                messages = list(self._request_pb.FromString(b"".join([self._topic_field, *request.chunks])).messages)
                origins = [row for run in request.origins for row in run.rows()]
            singles = [_Request(request.ordering_key, time.monotonic(), [m], [o], size, count=1, alone=True)
                       for m, o in zip(messages, origins)]
            self._outstanding_messages += len(singles)
            self._outstanding_bytes += size * len(singles)
            if request.ordering_key:
                waiting = self._waiting_for_key[request.ordering_key]
                waiting.extendleft(reversed(singles[1:]))
                self._ready.append(singles[0])  # the key stays busy: its next request waits behind these
            else:
                self._ready.extend(singles)
            return
        timed_out = " (past maxTotalTimeoutMs)" if code in TRANSIENT else ""
        raise PublishFailed(f"publish to {self._topic} failed{timed_out}: {code.name}: {detail}", request.origins,
                            unanswered=unanswered)

    def _settle(self, request: _Request) -> None:
        self._outstanding_messages -= request.count
        self._outstanding_bytes -= request.size
