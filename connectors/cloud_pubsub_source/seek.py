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


def _clear_pending_in_transactions(systems: Systems, bridge: Bridge) -> None:
    """Under exactly once every pull slot's record in the positions topic lists the ids of messages delivered and not
    known acked (exactly_once.py), and a message with such an id is acked without being written again. After a seek
    the messages it brings back are meant to be written again: each slot's record is committed empty, in a
    transaction of the slot's own producer (which fences one a killed run left behind)."""
    from connectors.cloud_pubsub_source.exactly_once import TRANSACTION_TIMEOUT_MS, position_key
    from connectors.kafka.connection import source_producer_config
    from connectors.kafka.transactions import PositionsTopic, commit_slot_records

    config, kafka = bridge.config, systems.kafka.admin()
    client_config = kafka.connection.librdkafka_config()
    positions = PositionsTopic(config.positions_topic_name(bridge.name), client_config)
    slots = positions.ensure(kafka, 1)  # every slot a run ever had: the topic has a partition per slot
    commit_slot_records(source_producer_config(client_config, bridge.batch.outage_timeout_seconds), positions,
                        [(slot, position_key(config, slot), {"pending": {}, "released": {}}) for slot in range(slots)],
                        TRANSACTION_TIMEOUT_MS, "clearing a pull slot's pending ids after a seek")


CLOUD_SUBSCRIPTION_SEEK = SubscriptionSeek(
    subscription=_subscription, snapshot_path=_snapshot_path, retains_acked=_retains_acked,
    take_snapshot=_take_snapshot, seek_to_time=_seek_to_time, seek_to_snapshot=_seek_to_snapshot,
    after_seek_in_transactions=_clear_pending_in_transactions)
