"""Read one Lite partition from a cursor up to an end offset over the Subscribe stream.

The library's high-level subscriber starts at the committed cursor and commits as messages are
acked; a micro-batch needs a bounded read from a cursor of its own and commits only after Kafka
took the records, so this drives the library's gapic SubscriberService stream directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from google.cloud.pubsublite_v1 import types

# No message for this long while the head says more exist: the server is stuck, fail the task.
STALL_TIMEOUT_S = 60


class LostToRetention(Exception):
    pass


async def read_partition(client, subscription: str, partition: int, start: int, end: int,
                         flow_messages: int, flow_bytes: int, stats: dict,
                         stall_timeout_s: float | None = STALL_TIMEOUT_S) -> AsyncIterator[list]:
    """Yield lists of raw SequencedMessages with offsets in [start, end), in order. An always-on stream reads
    with no end and no stall timeout (nothing arriving is not a stall there).

    Messages the topic's retention already dropped are skipped; `stats["lost"]` counts them and
    `stats["next_cursor"]` is where the next read starts (the committed cursor to write).
    """
    from google.cloud.pubsublite.internal.routing_metadata import subscription_routing_metadata
    from google.cloud.pubsublite.types import Partition, SubscriptionPath

    stats.update(lost=0, next_cursor=start)
    if start >= end:
        return
    requests: asyncio.Queue = asyncio.Queue()

    async def request_stream():
        while (request := await requests.get()) is not None:
            yield request

    initial = types.SubscribeRequest(initial=types.InitialSubscribeRequest(
        subscription=subscription, partition=partition,
        initial_location=types.SeekRequest(cursor=types.Cursor(offset=start))))
    requests.put_nowait(initial)
    requests.put_nowait(types.SubscribeRequest(flow_control=types.FlowControlRequest(
        allowed_messages=flow_messages, allowed_bytes=flow_bytes)))
    metadata = subscription_routing_metadata(SubscriptionPath.parse(subscription), Partition(partition))
    stream = await client.subscribe(requests=request_stream(), metadata=list(metadata.items()))
    responses = stream.__aiter__()
    try:
        first = types.SubscribeResponse.pb(await asyncio.wait_for(responses.__anext__(), stall_timeout_s))
        begin = first.initial.cursor.offset
        stats["lost"] = max(0, min(begin, end) - start)
        stats["next_cursor"] = max(start, min(begin, end))
        while stats["next_cursor"] < end:
            response = types.SubscribeResponse.pb(await asyncio.wait_for(responses.__anext__(), stall_timeout_s))
            batch = [m for m in response.messages.messages if m.cursor.offset < end]
            if not batch:
                continue
            gap = batch[0].cursor.offset - stats["next_cursor"]
            stats["lost"] += max(0, gap)  # retention dropped these while we read
            stats["next_cursor"] = batch[-1].cursor.offset + 1
            yield batch
            # Hand back what was taken, so the stream keeps the configured allowance outstanding.
            requests.put_nowait(types.SubscribeRequest(flow_control=types.FlowControlRequest(
                allowed_messages=len(response.messages.messages),
                allowed_bytes=sum(m.size_bytes for m in response.messages.messages))))
    finally:
        requests.put_nowait(None)
        stream.cancel()
