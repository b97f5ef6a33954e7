"""The always-on streams' lease against the local Kafka: a host's one beat keeps every hosted stream's tasks going,
a stop reaches one stream alone, and a host run that is gone (or replaced) ends its tasks within the lapse."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import TopicPartition

from connectors.kafka.stream_lease import LAPSE_S, OWNER_LOOK_S, HostBeat, LeaseHolder, LeaseWatcher
from tests.e2e.helpers import kafka_admin


def _topic() -> TopicPartition:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    kafka_admin().create_topic(name, 1)
    return TopicPartition(name, 0)


def _holds_until(watcher: LeaseWatcher, seconds: float) -> float | None:
    """Seconds until the watcher let go, or None if it held for `seconds`."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if not watcher.holds():
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def test_one_host_beat_keeps_its_streams_and_a_stop_or_a_gone_host_ends_them(stack):
    config = {"bootstrap.servers": stack.env()["KAFKA_BOOTSTRAP_SERVERS"]}
    # two bridges reading one partition (their leases share it) and a third reading another
    shared, other = _topic(), _topic()
    host_name = f"test-{uuid.uuid4().hex[:6]}"
    host = HostBeat(config, host_name)
    holders, watchers = {}, {}
    for bridge, where in (("a", shared), ("b", shared), ("c", other)):
        group = f"connect-{bridge}-{uuid.uuid4().hex[:6]}"
        holders[bridge] = LeaseHolder(config, group, where, f"stream-{bridge}", host)
        watchers[bridge] = LeaseWatcher(config, group, where, f"stream-{bridge}", host.ref)
    try:
        # the host's beat alone (no stream beats its own group) keeps them all for many lapses
        assert all(_holds_until(w, 3 * LAPSE_S) is None for w in watchers.values())

        holders["a"].stop()  # a's bridge switched off: its tasks stop, b's (same partition) go on
        let_go = _holds_until(watchers["a"], 3 * LAPSE_S)
        assert let_go is not None and let_go <= OWNER_LOOK_S + 0.5
        assert watchers["a"].why_not == "the run stopped it"
        assert _holds_until(watchers["b"], 2 * LAPSE_S) is None

        # the host's run replaced by a newer one (its keeper fenced it): the old run's tasks stop at once
        newer = HostBeat(config, host_name)
        newer.add((other.topic, other.partition))
        let_go = _holds_until(watchers["c"], 3 * LAPSE_S)
        assert let_go is not None and let_go <= 0.5 and watchers["c"].why_not == "a newer run of its host took over"
        newer.close()

        host.close()  # the host's run gone (killed): b stops once its beat has not moved for the lapse
        let_go = _holds_until(watchers["b"], 3 * LAPSE_S)
        assert let_go is not None and LAPSE_S - 0.3 <= let_go <= LAPSE_S + 0.5
        assert watchers["b"].why_not.startswith("the run has not renewed its lease")
    finally:
        for holder in holders.values():
            holder.close()
        for watcher in watchers.values():
            watcher.close()
        host.close()
