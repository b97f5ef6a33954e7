"""How to reach Pub/Sub Lite: Google's regional endpoints, or another endpoint such as the local server.

A LiteConnection is plain data, so it travels to Spark executors; clients are made there.
Credentials order, as in the reference: gcp.credentials.json, then gcp.credentials.file.path, then
application default credentials. An endpoint on loopback is a local server and gets anonymous
credentials; its certificate is trusted through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (`ca_file`).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the library is imported where it is used: config validation must stay light
    from google.cloud.pubsublite.types import CloudRegion, CloudZone, SubscriptionPath, TopicPath

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def parse_location(location: str) -> CloudRegion | CloudZone:
    """'us-central1-a' is a zone, 'us-central1' a region; both are valid Lite locations."""
    from google.cloud.pubsublite.types import CloudRegion, CloudZone

    try:
        return CloudZone.parse(location)
    except Exception:
        return CloudRegion.parse(location)


def region_of(location: CloudRegion | CloudZone) -> CloudRegion:
    from google.cloud.pubsublite.types import CloudZone

    return location.region if isinstance(location, CloudZone) else location


@dataclass(frozen=True)
class LiteConnection:
    api_endpoint: str | None = None  # None: the location's regional endpoint
    ca_file: str | None = None
    credentials_json: str | None = None
    credentials_file: str | None = None

    def __repr__(self) -> str:  # never print credentials
        return f"LiteConnection(api_endpoint={self.api_endpoint!r})"

    @property
    def is_local(self) -> bool:
        return bool(self.api_endpoint) and self.api_endpoint.rsplit(":", 1)[0] in LOOPBACK_HOSTS

    def _credentials(self):
        import google.auth
        from google.auth.credentials import AnonymousCredentials

        if self.credentials_json:
            return google.auth.load_credentials_from_dict(
                json.loads(self.credentials_json), scopes=[CLOUD_PLATFORM_SCOPE])[0]
        if self.credentials_file:
            return google.auth.load_credentials_from_file(self.credentials_file, scopes=[CLOUD_PLATFORM_SCOPE])[0]
        if self.is_local:
            return AnonymousCredentials()
        return None  # application default credentials

    def client_kwargs(self, region: CloudRegion) -> dict:
        """credentials and client_options for any Lite client, gapic or high level."""
        from google.api_core.client_options import ClientOptions
        from google.cloud.pubsublite.internal.endpoints import regional_endpoint

        if self.ca_file:
            # gRPC reads its default roots once per process; set it before the first channel.
            os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = self.ca_file
        return {"credentials": self._credentials(),
                "client_options": ClientOptions(api_endpoint=self.api_endpoint or regional_endpoint(region))}

    def admin(self, region: CloudRegion):
        from google.cloud.pubsublite import AdminClient

        return AdminClient(region, **self.client_kwargs(region))

    def cursor_service(self, region: CloudRegion):
        from google.cloud.pubsublite_v1 import CursorServiceClient

        return CursorServiceClient(**self.client_kwargs(region))

    def topic_stats_service(self, region: CloudRegion):
        from google.cloud.pubsublite_v1 import TopicStatsServiceClient

        return TopicStatsServiceClient(**self.client_kwargs(region))

    def async_subscriber_service(self, region: CloudRegion):
        from google.cloud.pubsublite_v1 import SubscriberServiceAsyncClient

        return SubscriberServiceAsyncClient(**self.client_kwargs(region))

    def async_cursor_service(self, region: CloudRegion):
        from google.cloud.pubsublite_v1 import CursorServiceAsyncClient

        return CursorServiceAsyncClient(**self.client_kwargs(region))

    def wire_publisher(self, topic: TopicPath, routing_policy_factory, batching=None):
        """The library's partition-aware async publisher, with our routing policy.

        Built from the library's own wire pieces as its make_publisher does, because make_publisher
        has no way to choose the routing policy and KAFKA ordering mode needs one. Publishing is
        idempotent per session (a client id), so a retried request is not appended twice.
        """
        from google.cloud.pubsublite.internal.publish_sequence_number import PublishSequenceNumber
        from google.cloud.pubsublite.internal.publisher_client_id import PublisherClientId
        from google.cloud.pubsublite.internal.routing_metadata import topic_routing_metadata
        from google.cloud.pubsublite.internal.wire.client_cache import ClientCache
        from google.cloud.pubsublite.internal.wire.gapic_connection import GapicConnectionFactory
        from google.cloud.pubsublite.internal.wire.make_publisher import (
            DEFAULT_BATCHING_SETTINGS, DEFAULT_PARTITION_POLL_PERIOD,
        )
        from google.cloud.pubsublite.internal.wire.partition_count_watcher_impl import PartitionCountWatcherImpl
        from google.cloud.pubsublite.internal.wire.partition_count_watching_publisher import (
            PartitionCountWatchingPublisher,
        )
        from google.cloud.pubsublite.internal.wire.single_partition_publisher import SinglePartitionPublisher
        from google.cloud.pubsublite_v1 import InitialPublishRequest, PublisherServiceAsyncClient

        region = region_of(topic.location)
        kwargs = self.client_kwargs(region)
        admin = self.admin(region)
        client_cache = ClientCache(lambda: PublisherServiceAsyncClient(transport="grpc_asyncio", **kwargs))
        client_id = PublisherClientId(uuid.uuid4().bytes)

        def publisher_factory(partition):
            def connection_factory(requests):
                metadata = topic_routing_metadata(topic, partition)
                return client_cache.get().publish(requests, metadata=list(metadata.items()))

            initial = InitialPublishRequest(topic=str(topic), partition=partition.value, client_id=client_id.value)
            return SinglePartitionPublisher(initial, batching or DEFAULT_BATCHING_SETTINGS,
                                            GapicConnectionFactory(connection_factory), PublishSequenceNumber(0))

        return PartitionCountWatchingPublisher(
            PartitionCountWatcherImpl(admin, topic, DEFAULT_PARTITION_POLL_PERIOD),
            publisher_factory, routing_policy_factory,
        )


def topic_path(project: str, location: str, topic: str) -> TopicPath:
    from google.cloud.pubsublite.types import TopicPath

    return TopicPath(project, parse_location(location), topic)


def subscription_path(project: str, location: str, subscription: str) -> SubscriptionPath:
    from google.cloud.pubsublite.types import SubscriptionPath

    return SubscriptionPath(project, parse_location(location), subscription)
