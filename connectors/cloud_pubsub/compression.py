"""Publish-side gRPC compression, as the Java publisher's setEnableCompression and
setCompressionBytesThreshold do: a publish request of at least the threshold in bytes is gzipped.

The Python client has no such switch, so this overrides the one method its batches call to send a
request (`_gapic_publish`, a private hook of the pinned google-cloud-pubsub) and passes gRPC's
per-call `compression`, which google-api-core forwards to the channel.
"""

from __future__ import annotations

import grpc
from google.api_core import gapic_v1
from google.cloud import pubsub_v1
from google.pubsub_v1.types import PublishRequest


class CompressingPublisherClient(pubsub_v1.PublisherClient):
    def __init__(self, *args, compression_bytes_threshold: int = 240, **kwargs):
        super().__init__(*args, **kwargs)
        self.compression_bytes_threshold = compression_bytes_threshold
        self.compressed_requests = 0  # for metrics and tests

    def compression_for(self, request: PublishRequest) -> grpc.Compression:
        if PublishRequest.pb(request).ByteSize() >= self.compression_bytes_threshold:
            return grpc.Compression.Gzip
        return grpc.Compression.NoCompression

    def _gapic_publish(self, topic, messages, retry=gapic_v1.method.DEFAULT, timeout=gapic_v1.method.DEFAULT):
        request = PublishRequest(topic=topic, messages=messages)
        compression = self.compression_for(request)
        if compression == grpc.Compression.Gzip:
            self.compressed_requests += 1
        rpc = self._transport._wrapped_methods[self._transport.publish]
        metadata = (gapic_v1.routing_header.to_grpc_metadata((("topic", topic),)),)
        return rpc(request, retry=retry, timeout=timeout, metadata=metadata, compression=compression)
