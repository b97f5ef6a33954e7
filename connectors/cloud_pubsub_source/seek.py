"""The Cloud Pub/Sub source's reset: its subscription's seek to a time or a snapshot, and the snapshot taken first.
Admin calls of Google's client only; nothing is pulled."""

from __future__ import annotations

from connectors.cloud_pubsub_source.subscription import ADMIN_TIMEOUT_S
from connectors.plugin import Bridge, SubscriptionSeek, Systems


def _subscription(bridge: Bridge) -> str:
    return f"projects/{bridge.config.cps_project}/subscriptions/{bridge.config.cps_subscription}"


def _snapshot_path(bridge: Bridge, snapshot_id: str) -> str:
    return snapshot_id if "/" in snapshot_id else f"projects/{bridge.config.cps_project}/snapshots/{snapshot_id}"


def _subscriber(systems: Systems, bridge: Bridge):
    return systems.pubsub.connection_for(bridge.config).subscriber()


def _retains_acked(systems: Systems, bridge: Bridge) -> bool:
    subscriber = _subscriber(systems, bridge)
    subscription = subscriber.get_subscription(subscription=_subscription(bridge), timeout=ADMIN_TIMEOUT_S)
    if subscription.retain_acked_messages:
        return True
    publisher = systems.pubsub.connection_for(bridge.config).publisher()  # the topic may retain messages itself
    return bool(publisher.get_topic(topic=subscription.topic, timeout=ADMIN_TIMEOUT_S).message_retention_duration)


def _take_snapshot(systems: Systems, bridge: Bridge, path: str) -> None:
    _subscriber(systems, bridge).create_snapshot(
        request={"name": path, "subscription": _subscription(bridge), "labels": {"made-by": "bridge-position-reset"}},
        timeout=ADMIN_TIMEOUT_S)


def _seek_to_time(systems: Systems, bridge: Bridge, epoch_ms: int) -> None:
    from datetime import datetime, timezone

    at = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    _subscriber(systems, bridge).seek(request={"subscription": _subscription(bridge), "time": at},
                                      timeout=ADMIN_TIMEOUT_S)


def _seek_to_snapshot(systems: Systems, bridge: Bridge, path: str) -> None:
    _subscriber(systems, bridge).seek(request={"subscription": _subscription(bridge), "snapshot": path},
                                      timeout=ADMIN_TIMEOUT_S)


CLOUD_SUBSCRIPTION_SEEK = SubscriptionSeek(
    subscription=_subscription, snapshot_path=_snapshot_path, retains_acked=_retains_acked,
    take_snapshot=_take_snapshot, seek_to_time=_seek_to_time, seek_to_snapshot=_seek_to_snapshot)
