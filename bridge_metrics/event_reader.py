"""Follows the Dagster instance's event log and keeps each bridge's metrics: every new materialization (a batch,
or a continuous run's commit) adds its counts, every check evaluation sets the check's gauge. What was read is
remembered by storage id, so each event counts once however often the endpoint is scraped; a new reader (the
exporter started again) reads each bridge's whole history first, so its counters are totals over all runs."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, DagsterInstance
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from bridge_metrics.bucketed import BucketedHistogram
from bridge_metrics.catalog import DURATION_BUCKETS_S, METRICS
from bridge_metrics.folding import fold
from connectors.framework.latency import BUCKETS_MS
from connectors.plugin import Bridge
import health

_PAGE = 1000
_KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}


class BridgeMetrics:
    """The metrics of the catalog in a registry of their own (the endpoint serves exactly these)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._by_name = {}
        for spec in METRICS:
            if spec.by_buckets:  # the only one: the Kafka sinks' latency, in their buckets
                metric = BucketedHistogram(spec.name, spec.help, spec.labels, [ms / 1000 for ms in BUCKETS_MS])
                self.registry.register(metric)
            else:
                extra = {"buckets": DURATION_BUCKETS_S} if spec.kind == "histogram" else {}
                metric = _KINDS[spec.kind](spec.base_name, spec.help, spec.labels, registry=self.registry, **extra)
            self._by_name[spec.name] = metric

    def __getitem__(self, name: str):
        return self._by_name[name]


def _labels(bridge: Bridge) -> tuple[str, str, str]:
    return bridge.name, bridge.connector, bridge.group


def _evaluation(record):
    return record.event.asset_check_evaluation if record is not None and record.event is not None else None


class EventReader:
    def __init__(self, instance: DagsterInstance, metrics: BridgeMetrics, clock: Callable[[], float] = time.time,
                 partition_lag: bool = False):
        self._instance, self._metrics, self._clock = instance, metrics, clock
        self._partition_lag = partition_lag  # a series per Kafka partition: only when asked
        self._materialized_after: dict[str, int] = {}  # bridge -> storage id of the last materialization read
        self._observed_after: dict[str, int] = {}  # bridge -> storage id of the last observation read
        self._failures_after: dict[str, int] = {}  # bridge -> id of the last batch_succeeded execution read
        self._positioned_at: dict[str, float] = {}  # bridge -> when its latest materialization was recorded
        self._lag_at: dict[str, float] = {}  # bridge -> when the lag gauge's value was recorded

    def read(self, bridges: Sequence[Bridge]) -> int:
        """Reads what was recorded since the last call; returns how many materializations that was."""
        read = 0
        for bridge in bridges:
            self._declare(bridge)
            read += self._read_materializations(bridge)
            self._read_observations(bridge)
            self._read_failures(bridge)
        self._read_checks(bridges)
        return read

    def _declare(self, bridge: Bridge) -> None:
        """Its counters at 0 before its first batch (an alert on their increase then sees the first one), and its
        checks' bounds."""
        keys = bridge.plugin.keys
        for metric in ("records_read", "records_delivered", "batches", *(name for name, _ in keys.counted)):
            self._metrics[f"bridge_{metric}_total"].labels(*_labels(bridge))
        if keys.lag is None:
            return
        self._metrics["bridge_lag_max_records"].labels(*_labels(bridge)).set(bridge.max_lag)
        self._metrics["bridge_stale_after_seconds"].labels(*_labels(bridge)).set(bridge.checks.max_age_minutes * 60)

    def _read_materializations(self, bridge: Bridge) -> int:
        name, labels, keys = bridge.name, _labels(bridge), bridge.plugin.keys
        read = 0
        while True:
            result = self._instance.fetch_materializations(
                AssetRecordsFilter(asset_key=AssetKey(name), after_storage_id=self._materialized_after.get(name)),
                limit=_PAGE, ascending=True)
            for record in result.records:
                values = {key: entry.value for key, entry in record.asset_materialization.metadata.items()}
                folded = fold(keys, values)
                for metric, amount in folded.added.items():
                    self._metrics[metric].labels(*labels).inc(amount)
                if folded.latency is not None:
                    self._metrics["bridge_delivery_latency_seconds"].add(labels, *folded.latency)
                if folded.duration_s is not None:
                    self._metrics["bridge_batch_duration_seconds"].labels(*labels).observe(folded.duration_s)
                if folded.lag is not None:
                    self._set_lag(bridge, folded.lag, record.timestamp)
                if self._partition_lag:
                    for (topic, partition), lag in folded.partition_lag.items():
                        self._metrics["bridge_partition_lag_records"].labels(*labels, topic, partition).set(lag)
                self._materialized_after[name] = record.storage_id
                self._positioned(bridge, record.timestamp)
                read += 1
            if not result.has_more:
                return read

    def _read_observations(self, bridge: Bridge) -> None:
        """An always-on bridge's commits that moved nothing are observations: they count nothing, but their lag is
        the latest (a bridge that fails again and again moves nothing while its lag grows)."""
        lag_key = bridge.plugin.keys.lag
        if lag_key is None:
            return
        while True:
            result = self._instance.fetch_observations(
                AssetRecordsFilter(asset_key=AssetKey(bridge.name), after_storage_id=self._observed_after.get(bridge.name)),
                limit=_PAGE, ascending=True)
            for record in result.records:
                lag = record.asset_observation.metadata.get(lag_key)
                if lag is not None:
                    self._set_lag(bridge, int(lag.value), record.timestamp)
                self._observed_after[bridge.name] = record.storage_id
            if not result.has_more:
                return

    def _positioned(self, bridge: Bridge, at: float) -> None:
        if bridge.name not in self._positioned_at:  # the gauge asks for its age when scraped
            self._metrics["bridge_position_age_seconds"].labels(*_labels(bridge)).set_function(
                lambda name=bridge.name: round(self._clock() - self._positioned_at[name], 3))
        self._positioned_at[bridge.name] = at

    def _set_lag(self, bridge: Bridge, lag: int, at: float) -> None:
        if at >= self._lag_at.get(bridge.name, float("-inf")):
            self._metrics["bridge_lag_records"].labels(*_labels(bridge)).set(lag)
            self._lag_at[bridge.name] = at

    def _read_failures(self, bridge: Bridge) -> None:
        """Each failure the bridge recorded (its batch_succeeded check turned red) counts once."""
        key = AssetCheckKey(AssetKey(bridge.name), health.BATCH_SUCCEEDED)
        seen = self._failures_after.get(bridge.name, 0)
        newest, failed, cursor = seen, 0, None
        storage = self._instance.event_log_storage
        while True:  # newest first, down to what was read before
            page = storage.get_asset_check_execution_history(key, limit=_PAGE, cursor=cursor)
            unread = [record for record in page if record.id > seen]
            failed += sum(1 for record in unread if (e := _evaluation(record)) is not None and not e.passed)
            newest = max([newest, *(record.id for record in unread)])
            if len(unread) < _PAGE:
                break
            cursor = page[-1].id
        self._failures_after[bridge.name] = newest
        counter = self._metrics["bridge_runs_failed_total"].labels(*_labels(bridge))  # 0 shows before any failure
        counter.inc(failed)

    def _read_checks(self, bridges: Sequence[Bridge]) -> None:
        by_key = {spec.key: bridge for bridge in bridges for spec in health.check_specs(bridge)}
        latest = self._instance.event_log_storage.get_latest_asset_check_execution_by_key(list(by_key))
        for key, record in latest.items():
            evaluation, bridge = _evaluation(record), by_key[key]
            if evaluation is None:  # planned or running: no outcome yet
                continue
            self._metrics["bridge_check_passed"].labels(*_labels(bridge), key.name).set(1 if evaluation.passed else 0)
            if key.name == health.BATCH_SUCCEEDED:
                self._metrics["bridge_up"].labels(*_labels(bridge)).set(1 if evaluation.passed else 0)
            lag = evaluation.metadata.get("lag")
            if key.name == health.LAG_WITHIN_BOUND and lag is not None:  # a sensor's reading between batches
                self._set_lag(bridge, int(lag.value), record.event.timestamp)  # create_timestamp is in whole seconds
