"""LitePublisher against a scripted in-process Publish service: pipelining, resends after a broken
stream (same client id and sequence numbers), and a permanent error naming its partition."""

import asyncio

import grpc
import pytest
from google.cloud.pubsublite_v1 import types

from connectors.pubsublite.stream_publisher import (
    LitePublisher, LitePublishFailed, LitePublishSettings, PublishRequestPb, PublishResponsePb,
)

MessagePb = types.PubSubMessage.pb()
TOPIC = "projects/p/locations/europe-west1-b/topics/t"


class ScriptedService:
    """Answers every message request, except where `break_after` says: the n-th stream (0-based) ends
    with `code` after reading that many message requests without answering them."""

    def __init__(self, break_after: dict[int, int], code=grpc.StatusCode.UNAVAILABLE):
        self.break_after = break_after
        self.code = code
        self.streams: list[dict] = []  # per stream: initial request, sequence numbers received

    async def publish(self, requests, context):
        stream = {"initial": None, "sequences": []}
        self.streams.append(stream)
        number = len(self.streams) - 1
        async for request in requests:
            if request.HasField("initial_request"):
                stream["initial"] = (request.initial_request.partition, request.initial_request.client_id)
                response = PublishResponsePb()
                response.initial_response.SetInParent()
                yield response
                continue
            batch = request.message_publish_request
            stream["sequences"].append((batch.first_sequence_number, len(batch.messages)))
            if len(stream["sequences"]) == self.break_after.get(number):
                await context.abort(self.code, "scripted failure")
            response = PublishResponsePb()
            response.message_response.start_cursor.offset = batch.first_sequence_number
            yield response


async def _publish(service: ScriptedService, messages: int, settings: LitePublishSettings):
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "google.cloud.pubsublite.v1.PublisherService",
        {"Publish": grpc.stream_stream_rpc_method_handler(
            service.publish, request_deserializer=PublishRequestPb.FromString,
            response_serializer=lambda m: m.SerializeToString())})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    acked: list = []
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        publisher = LitePublisher(channel, TOPIC, settings, acked.extend)
        for i in range(messages):
            message = MessagePb(data=f"m{i}".encode())
            await publisher.add(message, message.ByteSize(), i, partition=3)
        await publisher.close(20)
    finally:
        await channel.close()
        await server.stop(None)
    return acked


def test_requests_are_sealed_by_count_and_every_message_is_acked():
    service = ScriptedService({})
    acked = asyncio.run(_publish(service, 25, LitePublishSettings(max_messages=10)))
    assert sorted(acked) == list(range(25))
    assert service.streams[0]["initial"][0] == 3
    assert service.streams[0]["sequences"] == [(0, 10), (10, 10), (20, 5)]


def test_a_broken_stream_is_reopened_and_unacked_requests_resent_with_their_sequence_numbers():
    service = ScriptedService({0: 2})  # the first stream fails on its second request
    acked = asyncio.run(_publish(service, 30, LitePublishSettings(max_messages=10)))
    assert sorted(acked) == list(range(30))  # each message acknowledged once
    first, second = service.streams[0], service.streams[1]
    assert first["initial"] == second["initial"]  # same partition and client id: the service can deduplicate
    assert first["sequences"][:2] == [(0, 10), (10, 10)]
    # the second stream starts again from the first unanswered request, numbers unchanged
    assert second["sequences"][0] == (10, 10)
    assert second["sequences"][-1] == (20, 10)


def test_a_permanent_error_fails_naming_the_partition():
    service = ScriptedService({0: 1}, code=grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(LitePublishFailed, match=r"topics/t partition 3 failed: INVALID_ARGUMENT: scripted failure"):
        asyncio.run(_publish(service, 5, LitePublishSettings(max_messages=10)))
    assert len(service.streams) == 1  # not retried
