import grpc
from google.auth.credentials import AnonymousCredentials
from google.pubsub_v1.types import PublishRequest, PubsubMessage

from connectors.cloud_pubsub.compression import CompressingPublisherClient


def test_requests_at_or_over_the_threshold_are_gzipped():
    client = CompressingPublisherClient(credentials=AnonymousCredentials(), compression_bytes_threshold=240)
    small = PublishRequest(topic="projects/p/topics/t", messages=[PubsubMessage(data=b"x")])
    size = PublishRequest.pb(small).ByteSize()
    assert client.compression_for(small) == grpc.Compression.NoCompression
    client.compression_bytes_threshold = size
    assert client.compression_for(small) == grpc.Compression.Gzip
    client.compression_bytes_threshold = size + 1
    assert client.compression_for(small) == grpc.Compression.NoCompression
