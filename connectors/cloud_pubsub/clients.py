"""How to reach Cloud Pub/Sub: the emulator, or a real endpoint with GCP credentials.

A PubSubConnection is plain data, so it travels to Spark executors; clients are made there.
Credentials order, as in the reference: gcp.credentials.json, then gcp.credentials.file.path,
then application default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, metadata server).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

PUBSUB_SCOPE = "https://www.googleapis.com/auth/pubsub"


@dataclass(frozen=True)
class PubSubConnection:
    endpoint: str = "pubsub.googleapis.com:443"
    emulator_host: str | None = None
    credentials_json: str | None = None
    credentials_file: str | None = None

    def __repr__(self) -> str:  # never print credentials
        return f"PubSubConnection(endpoint={self.endpoint!r}, emulator_host={self.emulator_host!r})"

    def _credentials(self):
        if self.emulator_host:
            return None
        import google.auth

        if self.credentials_json:
            return google.auth.load_credentials_from_dict(json.loads(self.credentials_json), scopes=[PUBSUB_SCOPE])[0]
        if self.credentials_file:
            return google.auth.load_credentials_from_file(self.credentials_file, scopes=[PUBSUB_SCOPE])[0]
        return None  # application default credentials

    def _prepare(self) -> dict:
        if self.emulator_host:
            # The client library switches to an insecure channel and no credentials on this variable.
            os.environ["PUBSUB_EMULATOR_HOST"] = self.emulator_host
            return {}
        os.environ.pop("PUBSUB_EMULATOR_HOST", None)
        kwargs: dict = {"client_options": {"api_endpoint": self.endpoint}}
        credentials = self._credentials()
        if credentials is not None:
            kwargs["credentials"] = credentials
        return kwargs

    def publisher(self, batch_settings=None, publisher_options=None, compression_bytes_threshold: int | None = None):
        """A publisher; with a compression threshold, requests of at least that many bytes are gzipped."""
        from google.cloud import pubsub_v1

        kwargs = self._prepare()
        args = [batch_settings] if batch_settings is not None else []
        if publisher_options is not None:
            kwargs["publisher_options"] = publisher_options
        if compression_bytes_threshold is None:
            return pubsub_v1.PublisherClient(*args, **kwargs)
        from connectors.cloud_pubsub.compression import CompressingPublisherClient

        return CompressingPublisherClient(*args, compression_bytes_threshold=compression_bytes_threshold, **kwargs)

    def subscriber(self):
        from google.cloud import pubsub_v1

        return pubsub_v1.SubscriberClient(**self._prepare())
