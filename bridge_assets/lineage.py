"""The topics, subscriptions and prefixes the bridges read and write, as external assets (`AssetSpec`s), so
the lineage page draws the data's path across systems: Kafka -> bridge -> Pub/Sub topic -> subscription ->
bridge -> Kafka.

A subscription's topic is not in a bridge's config (the Java connector's keys name only the subscription),
so it is asked of Pub/Sub or Lite once when the code location loads, with a short deadline; a system that
does not answer in time leaves the subscription drawn without its topic, and the load goes on.
"""

from __future__ import annotations

import concurrent.futures
import logging
from dataclasses import dataclass
from typing import Iterable

from dagster import AssetKey, AssetSpec

from connectors.endpoints import Endpoint

log = logging.getLogger(__name__)
LOOKUP_DEADLINE_S = 4.0


@dataclass(frozen=True)
class BridgeEnds:
    """What one bridge reads and writes."""

    asset: AssetKey
    group: str
    reads: tuple[Endpoint, ...]
    writes: tuple[Endpoint, ...]


def external_specs(bridges: Iterable[BridgeEnds]) -> list[AssetSpec]:
    """One AssetSpec per endpoint: a target depends on the bridges that write it, a subscription on its
    topic. An endpoint is in the group of the first bridge that names it."""
    bridges = list(bridges)
    endpoints: dict[AssetKey, Endpoint] = {}
    groups: dict[AssetKey, str] = {}
    writers: dict[AssetKey, list[AssetKey]] = {}
    for bridge in bridges:
        for endpoint in (*bridge.reads, *bridge.writes):
            endpoints.setdefault(AssetKey(endpoint.key), endpoint)
            groups.setdefault(AssetKey(endpoint.key), bridge.group)
        for endpoint in bridge.writes:
            writers.setdefault(AssetKey(endpoint.key), []).append(bridge.asset)

    for key, topic in _look_up_topics([e for e in endpoints.values() if e.fed_by]).items():
        topic_key = AssetKey(topic.key)
        if topic_key not in endpoints:
            endpoints[topic_key] = topic
            groups[topic_key] = groups[key]
        writers.setdefault(key, []).append(topic_key)

    return [AssetSpec(key, deps=writers.get(key, []), description=e.description, kinds={e.kind},
                      group_name=groups[key])
            for key, e in endpoints.items()]


def _look_up_topics(subscriptions: list[Endpoint]) -> dict[AssetKey, Endpoint]:
    """Each subscription's topic, asked in parallel; what is not answered within the deadline is left out."""
    if not subscriptions:
        return {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(subscriptions), thread_name_prefix="lineage")
    futures = {pool.submit(s.fed_by): s for s in subscriptions}
    done, late = concurrent.futures.wait(futures, timeout=LOOKUP_DEADLINE_S)
    pool.shutdown(wait=False, cancel_futures=True)
    found = {}
    for future in done:
        subscription = futures[future]
        try:
            topic = future.result()
        except Exception as exc:  # noqa: BLE001 - a lineage edge is not worth failing the load
            log.warning("lineage: the topic of %s is unknown (%s: %s)", subscription.description,
                        type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            continue
        if topic is not None:
            found[AssetKey(subscription.key)] = topic
    for future in late:
        log.warning("lineage: the topic of %s is unknown (no answer within %.0f s)", futures[future].description,
                    LOOKUP_DEADLINE_S)
    return found
