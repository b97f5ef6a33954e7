"""The gRPC services of Pub/Sub Lite over LiteStore, with the wire behaviour the client library expects.

Handlers are registered generically with the protobuf classes behind the library's proto-plus types,
so requests and responses are the exact messages of google.cloud.pubsublite.v1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
from google.cloud.pubsublite_v1 import types
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, timestamp_pb2

from local_stack.lite_server.store import LiteError, LiteStore

PACKAGE = "google.cloud.pubsublite.v1"
# One Subscribe response carries at most this much, as the service batches deliveries.
MAX_RESPONSE_MESSAGES = 1000
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def _pb(proto_plus_type):
    return proto_plus_type.pb()


async def _abort(context: grpc.aio.ServicerContext, error: LiteError) -> None:
    await context.abort(error.code, error.message)


def _unary(store_call, request_type, response_type):
    async def handler(request, context):
        try:
            return store_call(request)
        except LiteError as error:
            await _abort(context, error)

    return grpc.unary_unary_rpc_method_handler(
        handler, request_deserializer=_pb(request_type).FromString,
        response_serializer=lambda m: m.SerializeToString())


def _streaming(generator, request_type, response_type):
    async def handler(requests, context):
        try:
            async for response in generator(requests, context):
                yield response
        except LiteError as error:
            await _abort(context, error)

    return grpc.stream_stream_rpc_method_handler(
        handler, request_deserializer=_pb(request_type).FromString,
        response_serializer=lambda m: m.SerializeToString())


async def _first(requests: AsyncIterator, field_name: str):
    try:
        first = await requests.__anext__()
    except StopAsyncIteration:
        raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "The stream ended before its initial request.")
    if first.WhichOneof(first.DESCRIPTOR.oneofs[0].name) != field_name:
        raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, f"The first request on the stream must be {field_name}.")
    return getattr(first, field_name)


# --- admin -------------------------------------------------------------------------------------------
def _or_head(offset: int | None, log) -> int:
    return log.head if offset is None else offset


def _done_operation(target: str, verb: str, started, response) -> operations_pb2.Operation:
    """A long-running operation that is already done, so a client's `result()` needs no Operations service."""
    metadata = _pb(types.OperationMetadata)(target=target, verb=verb, create_time=started)
    metadata.end_time.GetCurrentTime()
    operation = operations_pb2.Operation(name=f"{target.split('/subscriptions/')[0]}/operations/{verb}-"
                                              f"{started.ToNanoseconds()}", done=True)
    operation.metadata.Pack(metadata)
    operation.response.Pack(response)
    return operation


def admin_handlers(store: LiteStore) -> grpc.GenericRpcHandler:
    t = types

    def get_topic_partitions(request):
        return _pb(t.TopicPartitions)(partition_count=store.topic(request.name).partition_config.count)

    def list_topic_subscriptions(request):
        return _pb(t.ListTopicSubscriptionsResponse)(subscriptions=store.topic_subscriptions(request.name))

    def delete_topic(request):
        store.delete_topic(request.name)
        return empty_pb2.Empty()

    def delete_subscription(request):
        store.delete_subscription(request.name)
        return empty_pb2.Empty()

    def seek_subscription(request):
        target = request.WhichOneof("target")
        if target == "named_target" and request.named_target == t.SeekSubscriptionRequest.NamedTarget.TAIL:
            offset_of = lambda log: log.first_offset  # noqa: E731
        elif target == "named_target" and request.named_target == t.SeekSubscriptionRequest.NamedTarget.HEAD:
            offset_of = lambda log: log.head  # noqa: E731
        elif target == "time_target":
            by_publish = request.time_target.WhichOneof("time") == "publish_time"
            stamp = request.time_target.publish_time if by_publish else request.time_target.event_time
            offset_of = lambda log: _or_head(log.time_cursor(stamp.ToNanoseconds(), by_publish), log)  # noqa: E731
        else:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "A seek needs a named target (HEAD or TAIL) or a time.")
        started = timestamp_pb2.Timestamp()
        started.GetCurrentTime()
        store.seek_subscription(request.name, offset_of)
        return _done_operation(request.name, "seek", started, _pb(t.SeekSubscriptionResponse)())

    methods = {
        "CreateTopic": (lambda r: store.create_topic(r.parent, r.topic_id, r.topic), t.CreateTopicRequest, t.Topic),
        "GetTopic": (lambda r: store.topic(r.name), t.GetTopicRequest, t.Topic),
        "GetTopicPartitions": (get_topic_partitions, t.GetTopicPartitionsRequest, t.TopicPartitions),
        "ListTopics": (lambda r: _pb(t.ListTopicsResponse)(topics=store.list_topics(r.parent)),
                       t.ListTopicsRequest, t.ListTopicsResponse),
        "UpdateTopic": (lambda r: store.update_topic(r.topic, list(r.update_mask.paths)), t.UpdateTopicRequest, t.Topic),
        "DeleteTopic": (delete_topic, t.DeleteTopicRequest, None),
        "ListTopicSubscriptions": (list_topic_subscriptions, t.ListTopicSubscriptionsRequest,
                                   t.ListTopicSubscriptionsResponse),
        "CreateSubscription": (
            lambda r: store.create_subscription(r.parent, r.subscription_id, r.subscription, r.skip_backlog),
            t.CreateSubscriptionRequest, t.Subscription),
        "GetSubscription": (lambda r: store.subscription(r.name), t.GetSubscriptionRequest, t.Subscription),
        "ListSubscriptions": (lambda r: _pb(t.ListSubscriptionsResponse)(subscriptions=store.list_subscriptions(r.parent)),
                              t.ListSubscriptionsRequest, t.ListSubscriptionsResponse),
        "UpdateSubscription": (lambda r: store.update_subscription(r.subscription, list(r.update_mask.paths)),
                               t.UpdateSubscriptionRequest, t.Subscription),
        "DeleteSubscription": (delete_subscription, t.DeleteSubscriptionRequest, None),
        "SeekSubscription": (seek_subscription, t.SeekSubscriptionRequest, None),
    }
    return grpc.method_handlers_generic_handler(
        f"{PACKAGE}.AdminService", {name: _unary(*spec) for name, spec in methods.items()})


# --- publish -----------------------------------------------------------------------------------------
def publisher_handlers(store: LiteStore) -> grpc.GenericRpcHandler:
    PublishResponse = _pb(types.PublishResponse)

    async def publish(requests, context):
        initial = await _first(requests, "initial_request")
        store.log(initial.topic, initial.partition)  # NOT_FOUND / INVALID_ARGUMENT before anything is accepted
        response = PublishResponse()
        response.initial_response.SetInParent()
        yield response
        async for request in requests:
            if request.WhichOneof("request_type") != "message_publish_request":
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "Expected a message publish request.")
            batch = request.message_publish_request
            ranges = store.publish(initial.topic, initial.partition, batch.messages, initial.client_id,
                                   batch.first_sequence_number)
            response = PublishResponse()
            response.message_response.SetInParent()
            for start_index, end_index, start_offset in ranges:
                cursor_range = response.message_response.cursor_ranges.add(start_index=start_index,
                                                                           end_index=end_index)
                cursor_range.start_cursor.offset = start_offset
                if not response.message_response.HasField("start_cursor"):
                    response.message_response.start_cursor.offset = start_offset
            yield response

    return grpc.method_handlers_generic_handler(
        f"{PACKAGE}.PublisherService", {"Publish": _streaming(publish, types.PublishRequest, types.PublishResponse)})


# --- subscribe ---------------------------------------------------------------------------------------
@dataclass
class _SubscribeStream:
    offset: int
    allowed_messages: int = 0
    allowed_bytes: int = 0
    pending_seek: object | None = None
    closed: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)


def _seek_target(store: LiteStore, subscription: str, partition: int, seek) -> int:
    log = store.subscription_log(subscription, partition)
    target = seek.WhichOneof("target")
    if target == "cursor":
        if seek.cursor.offset > log.head:
            raise LiteError(grpc.StatusCode.OUT_OF_RANGE,
                            f"Seek to offset {seek.cursor.offset} is past the head {log.head}.")
        return max(seek.cursor.offset, log.first_offset)
    if target == "named_target" and seek.named_target == types.SeekRequest.NamedTarget.HEAD:
        return log.head
    if target == "named_target" and seek.named_target == types.SeekRequest.NamedTarget.COMMITTED_CURSOR:
        return max(store.committed_cursor(subscription, partition), log.first_offset)
    raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "A seek needs a cursor or a named target.")


def subscriber_handlers(store: LiteStore) -> grpc.GenericRpcHandler:
    SubscribeResponse = _pb(types.SubscribeResponse)

    async def read_requests(requests, stream: _SubscribeStream, subscription: str, partition: int):
        async for request in requests:
            kind = request.WhichOneof("request")
            if kind == "flow_control":
                if request.flow_control.allowed_messages < 0 or request.flow_control.allowed_bytes < 0:
                    raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "Flow control tokens must not be negative.")
                stream.allowed_messages += request.flow_control.allowed_messages
                stream.allowed_bytes += request.flow_control.allowed_bytes
            elif kind == "seek":
                if stream.pending_seek is not None:
                    raise LiteError(grpc.StatusCode.FAILED_PRECONDITION, "A seek is already outstanding.")
                stream.pending_seek = request.seek
            else:
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "Only flow control and seek follow the initial request.")
            stream.wake.set()
        stream.closed = True
        stream.wake.set()

    async def subscribe(requests, context):
        initial = await _first(requests, "initial")
        subscription, partition = initial.subscription, initial.partition
        log = store.subscription_log(subscription, partition)
        if initial.HasField("initial_location"):
            offset = _seek_target(store, subscription, partition, initial.initial_location)
        else:
            offset = max(store.committed_cursor(subscription, partition), log.first_offset)
        response = SubscribeResponse()
        response.initial.cursor.offset = offset
        yield response

        stream = _SubscribeStream(offset=offset)
        reader = asyncio.create_task(read_requests(requests, stream, subscription, partition))
        log.waiters.add(stream.wake)
        try:
            while True:
                stream.wake.clear()
                if reader.done():
                    if reader.exception() is not None:
                        raise reader.exception()
                    return
                if stream.pending_seek is not None:
                    stream.offset = _seek_target(store, subscription, partition, stream.pending_seek)
                    stream.pending_seek = None
                    # A seek resets the tokens the client granted, as the service documents.
                    stream.allowed_messages = stream.allowed_bytes = 0
                    response = SubscribeResponse()
                    response.seek.cursor.offset = stream.offset
                    yield response
                    continue
                batch = log.read(stream.offset, min(stream.allowed_messages, MAX_RESPONSE_MESSAGES),
                                 min(stream.allowed_bytes, MAX_RESPONSE_BYTES))
                if batch:
                    response = SubscribeResponse()
                    response.messages.messages.extend(batch)
                    stream.offset = batch[-1].cursor.offset + 1
                    stream.allowed_messages -= len(batch)
                    stream.allowed_bytes -= sum(m.size_bytes for m in batch)
                    yield response
                    continue
                await stream.wake.wait()
        finally:
            log.waiters.discard(stream.wake)
            reader.cancel()

    return grpc.method_handlers_generic_handler(
        f"{PACKAGE}.SubscriberService",
        {"Subscribe": _streaming(subscribe, types.SubscribeRequest, types.SubscribeResponse)})


# --- partition assignment ----------------------------------------------------------------------------
@dataclass
class _Member:
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    current: tuple = ()
    held: frozenset = frozenset()
    awaiting_ack: bool = False
    sent: bool = False


class AssignmentGroups:
    """Subscribers of one subscription share its partitions evenly.

    A member's next assignment waits for its ack of the last one, and a partition goes to its new member only
    once the member that had it acked an assignment without it (or left): the client acks after it stopped
    reading the partitions taken away and flushed their commits, so the new member starts at the committed
    cursor of every message the old one acked, and none of them arrives twice.
    """

    def __init__(self, store: LiteStore):
        self._store = store
        self._groups: dict[str, dict[bytes, _Member]] = {}

    def join(self, subscription: str, client_id: bytes) -> _Member:
        group = self._groups.setdefault(subscription, {})
        if client_id in group:
            raise LiteError(grpc.StatusCode.ALREADY_EXISTS, "A client with this id is already assigned partitions.")
        member = group[client_id] = _Member()
        self._rebalance(subscription)
        return member

    def leave(self, subscription: str, client_id: bytes) -> None:
        group = self._groups.get(subscription, {})
        group.pop(client_id, None)
        if group:
            self._rebalance(subscription)

    def ack(self, subscription: str, member: _Member) -> None:
        if not member.awaiting_ack:
            raise LiteError(grpc.StatusCode.FAILED_PRECONDITION, "Acknowledged an assignment that was not sent.")
        member.awaiting_ack, member.held = False, frozenset(member.current)
        self._rebalance(subscription)

    def _rebalance(self, subscription: str) -> None:
        topic = self._store.topic(self._store.subscription(subscription).topic)
        group = self._groups[subscription]
        ids = sorted(group)
        shares = {client_id: [] for client_id in ids}
        for partition in range(topic.partition_config.count):
            shares[ids[partition % len(ids)]].append(partition)
        for client_id, partitions in shares.items():
            member = group[client_id]
            if member.awaiting_ack:
                continue  # its ack rebalances again
            held_by_others = set().union(*(other.held for other in group.values() if other is not member))
            granted = tuple(p for p in partitions if p not in held_by_others)
            if granted != member.current or not member.sent:
                member.current, member.held = granted, member.held | frozenset(granted)
                member.awaiting_ack = member.sent = True
                member.queue.put_nowait(granted)


def assignment_handlers(store: LiteStore) -> grpc.GenericRpcHandler:
    groups = AssignmentGroups(store)
    PartitionAssignment = _pb(types.PartitionAssignment)

    async def read_acks(requests, subscription: str, member: _Member):
        async for request in requests:
            if request.WhichOneof("request") != "ack":
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "Only acks follow the initial request.")
            groups.ack(subscription, member)
        member.queue.put_nowait(None)

    async def assign_partitions(requests, context):
        initial = await _first(requests, "initial")
        store.subscription(initial.subscription)
        member = groups.join(initial.subscription, initial.client_id)
        reader = asyncio.create_task(read_acks(requests, initial.subscription, member))
        try:
            while True:
                getter = asyncio.ensure_future(member.queue.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    if reader.exception() is not None:
                        raise reader.exception()
                    return
                partitions = getter.result()
                if partitions is None:
                    return
                yield PartitionAssignment(partitions=list(partitions))
        finally:
            reader.cancel()
            groups.leave(initial.subscription, initial.client_id)

    return grpc.method_handlers_generic_handler(
        f"{PACKAGE}.PartitionAssignmentService",
        {"AssignPartitions": _streaming(assign_partitions, types.PartitionAssignmentRequest,
                                        types.PartitionAssignment)})


# --- cursors -----------------------------------------------------------------------------------------
def cursor_handlers(store: LiteStore) -> grpc.GenericRpcHandler:
    StreamingCommitCursorResponse = _pb(types.StreamingCommitCursorResponse)

    async def streaming_commit(requests, context):
        initial = await _first(requests, "initial")
        store.subscription_log(initial.subscription, initial.partition)
        response = StreamingCommitCursorResponse()
        response.initial.SetInParent()
        yield response
        async for request in requests:
            if request.WhichOneof("request") != "commit":
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "Only commits follow the initial request.")
            store.commit_cursor(initial.subscription, initial.partition, request.commit.cursor.offset)
            response = StreamingCommitCursorResponse()
            response.commit.acknowledged_commits = 1
            yield response

    def commit(request):
        store.commit_cursor(request.subscription, request.partition, request.cursor.offset)
        return _pb(types.CommitCursorResponse)()

    def list_cursors(request):
        response = _pb(types.ListPartitionCursorsResponse)()
        for partition, offset in store.partition_cursors(request.parent):
            entry = response.partition_cursors.add(partition=partition)
            entry.cursor.offset = offset
        return response

    return grpc.method_handlers_generic_handler(f"{PACKAGE}.CursorService", {
        "StreamingCommitCursor": _streaming(streaming_commit, types.StreamingCommitCursorRequest,
                                            types.StreamingCommitCursorResponse),
        "CommitCursor": _unary(commit, types.CommitCursorRequest, types.CommitCursorResponse),
        "ListPartitionCursors": _unary(list_cursors, types.ListPartitionCursorsRequest,
                                       types.ListPartitionCursorsResponse),
    })


# --- topic stats -------------------------------------------------------------------------------------
def topic_stats_handlers(store: LiteStore) -> grpc.GenericRpcHandler:
    def head_cursor(request):
        response = _pb(types.ComputeHeadCursorResponse)()
        response.head_cursor.offset = store.log(request.topic, request.partition).head
        return response

    def message_stats(request):
        log = store.log(request.topic, request.partition)
        end = request.end_cursor.offset if request.HasField("end_cursor") else log.head
        response = _pb(types.ComputeMessageStatsResponse)()
        messages = log.read(request.start_cursor.offset, max(0, end - max(request.start_cursor.offset, log.first_offset)),
                            1 << 62)
        response.message_count = len(messages)
        response.message_bytes = sum(m.size_bytes for m in messages)
        if messages:
            response.minimum_publish_time.CopyFrom(min((m.publish_time for m in messages),
                                                       key=lambda ts: ts.ToNanoseconds()))
            event_times = [m.message.event_time for m in messages if m.message.HasField("event_time")]
            if event_times:
                response.minimum_event_time.CopyFrom(min(event_times, key=lambda ts: ts.ToNanoseconds()))
        return response

    def time_cursor(request):
        log = store.log(request.topic, request.partition)
        by_publish = request.target.WhichOneof("time") == "publish_time"
        target = (request.target.publish_time if by_publish else request.target.event_time).ToNanoseconds()
        response = _pb(types.ComputeTimeCursorResponse)()
        offset = log.time_cursor(target, by_publish)
        if offset is not None:  # else the cursor stays unset, as the service says "no such message"
            response.cursor.offset = offset
        return response

    return grpc.method_handlers_generic_handler(f"{PACKAGE}.TopicStatsService", {
        "ComputeHeadCursor": _unary(head_cursor, types.ComputeHeadCursorRequest, types.ComputeHeadCursorResponse),
        "ComputeMessageStats": _unary(message_stats, types.ComputeMessageStatsRequest,
                                      types.ComputeMessageStatsResponse),
        "ComputeTimeCursor": _unary(time_cursor, types.ComputeTimeCursorRequest, types.ComputeTimeCursorResponse),
    })


def all_handlers(store: LiteStore) -> list[grpc.GenericRpcHandler]:
    return [admin_handlers(store), publisher_handlers(store), subscriber_handlers(store),
            assignment_handlers(store), cursor_handlers(store), topic_stats_handlers(store)]
