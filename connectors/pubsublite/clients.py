"""How to reach Pub/Sub Lite: Google's regional endpoints, or another endpoint such as the local server.

A LiteConnection is plain data, so it travels to Spark executors; clients are made there.
Credentials order, as in the reference: gcp.credentials.json, then gcp.credentials.file.path, then
application default credentials. An endpoint on loopback is a local server and gets anonymous
credentials; its certificate is trusted through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (`ca_file`).
"""

from __future__ import annotations

import json
import os
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

    def address_of(self, location) -> str:
        """Where requests for `location` go, for error lines."""
        from google.cloud.pubsublite.internal.endpoints import regional_endpoint

        return self.api_endpoint or regional_endpoint(region_of(location))

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

    def async_publish_channel(self, location: CloudRegion | CloudZone):
        """An asyncio gRPC channel for raw publish streams (connectors.pubsublite.stream_publisher)."""
        from google.api_core import grpc_helpers_async
        from google.cloud.pubsublite.internal.endpoints import regional_endpoint

        region = region_of(location)
        credentials = self.client_kwargs(region)["credentials"]  # also points gRPC at ca_file
        return grpc_helpers_async.create_channel(
            self.api_endpoint or regional_endpoint(region), credentials=credentials, scopes=[CLOUD_PLATFORM_SCOPE],
            options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])


def topic_path(project: str, location: str, topic: str) -> TopicPath:
    from google.cloud.pubsublite.types import TopicPath

    return TopicPath(project, parse_location(location), topic)


def subscription_path(project: str, location: str, subscription: str) -> SubscriptionPath:
    from google.cloud.pubsublite.types import SubscriptionPath

    return SubscriptionPath(project, parse_location(location), subscription)
