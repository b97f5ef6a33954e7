"""How to reach Cloud Pub/Sub: the emulator, or a real endpoint with GCP credentials.

A PubSubConnection is plain data, so it travels to Spark executors; clients are made there.
Credentials order, as in the reference: gcp.credentials.json, then gcp.credentials.file.path,
then application default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, metadata server).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass

PUBSUB_SCOPE = "https://www.googleapis.com/auth/pubsub"
_CHANNELS: dict = {}  # shared_publish_channel's, by connection
_CHANNELS_LOCK = threading.Lock()


def keep_polling_thread(channel) -> bool:
    """Keeps a sync gRPC channel's polling thread for the process's life; whether it could.

    The channel starts a thread to poll its calls whenever a call starts on it while none is out, and the thread
    ends with the last call: an always-on sink's round (one request, then quiet until the next) started and ended a
    thread every round, 12 % of a two-record round's CPU (measured: 727 -> 639 us). One call counted that never
    ends keeps the thread. grpc has no public way to ask for this, so it reaches into the channel's call state;
    a grpc without it (or another channel class) keeps its own behaviour."""
    from grpc import _channel as grpc_channel

    state = getattr(channel, "_call_state", None)
    start = getattr(grpc_channel, "_run_channel_spin_thread", None)
    if state is None or start is None or not hasattr(state, "managed_calls"):
        return False
    with state.lock:
        state.managed_calls += 1
        if state.managed_calls == 1:
            start(state)
    return True


@dataclass(frozen=True)
class PubSubConnection:
    endpoint: str = "pubsub.googleapis.com:443"
    emulator_host: str | None = None
    credentials_json: str | None = None
    credentials_file: str | None = None

    def __repr__(self) -> str:  # never print credentials
        return f"PubSubConnection(endpoint={self.endpoint!r}, emulator_host={self.emulator_host!r})"

    @property
    def address(self) -> str:
        """Where requests go, for error lines."""
        return self.emulator_host or self.endpoint

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

    def shared_publish_channel(self):
        """This process's channel for raw publish requests to this endpoint, made on first use and kept: a channel
        costs a connection, a handshake and a polling thread, which an always-on sink's rounds of a few records each
        paid every round (a third of a shared stream task's CPU, per py-spy). gRPC reconnects it by itself after an
        outage; do not close it."""
        with _CHANNELS_LOCK:
            channel = _CHANNELS.get(self)
            if channel is None:
                channel = _CHANNELS[self] = self.publish_channel()
                keep_polling_thread(channel)
            return channel

    def publish_channel(self):
        """A new gRPC channel for raw publish requests (connectors.cloud_pubsub.request_publisher)."""
        import grpc

        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1),
                   # A kept channel whose server was away tries again within 2 s of its return (gRPC's default
                   # backoff grows to 2 minutes).
                   ("grpc.initial_reconnect_backoff_ms", 500), ("grpc.max_reconnect_backoff_ms", 2000)]
        if self.emulator_host:
            return grpc.insecure_channel(self.emulator_host, options=options)
        from google.api_core import grpc_helpers

        return grpc_helpers.create_channel(self.endpoint, credentials=self._credentials(), scopes=[PUBSUB_SCOPE],
                                           default_host="pubsub.googleapis.com", options=options)

    def subscriber(self):
        from google.cloud import pubsub_v1

        return pubsub_v1.SubscriberClient(**self._prepare())

    def publisher(self):
        """The client library's publisher, for topic administration (messages go through request_publisher)."""
        from google.cloud import pubsub_v1

        return pubsub_v1.PublisherClient(**self._prepare())
