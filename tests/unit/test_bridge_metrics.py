"""The metrics made from what bridges record: one batch's values as counter increments (by the connector's
ReportKeys), and the event reader against a real Dagster instance counting each event once."""

from __future__ import annotations

import pytest
from dagster import AssetKey, AssetMaterialization, DagsterInstance, MetadataValue

from bridge_metrics.catalog import METRICS
from bridge_metrics.event_reader import BridgeMetrics, EventReader
from bridge_metrics.folding import fold
from connectors.bridge import BatchSettings, CheckSettings, SensorSettings
from connectors.framework.plugin_parts import SINK_KEYS
from connectors.plugin import Bridge, COUNTED_METRICS, ReportKeys
from connectors.plugins import plugin_for
import health


def test_a_sink_batch_adds_its_counts_to_the_counters_its_keys_name():
    folded = fold(SINK_KEYS, {"records_read": 5, "records_published": 3, "records_dead_lettered": 1,
                              "records_dropped": 0, "records_dead_letter_refused": 1, "records_skipped": 0,
                              "bytes_read": 120, "headers_dropped": 7, "duration_seconds": 1.5, "lag_remaining": 4})
    assert folded.added == {
        "bridge_records_read_total": 5, "bridge_records_delivered_total": 3, "bridge_batches_total": 1,
        "bridge_records_dead_lettered_total": 1, "bridge_records_dropped_total": 0,
        "bridge_records_dead_letter_refused_total": 1, "bridge_records_skipped_total": 0, "bridge_bytes_read_total": 120}
    assert (folded.duration_s, folded.lag) == (1.5, 4)


def test_a_source_without_lag_and_a_batch_missing_values_fold_to_zero_and_none():
    keys = plugin_for("CloudPubSubSourceConnector").keys
    folded = fold(keys, {"messages_pulled": 10, "records_written": 9, "messages_dropped": 1, "bytes_written": 900})
    assert folded.added["bridge_records_read_total"] == 10 and folded.added["bridge_records_dropped_total"] == 1
    assert folded.added["bridge_bytes_written_total"] == 900 and folded.lag is None and folded.duration_s is None
    assert fold(keys, {}).added["bridge_records_delivered_total"] == 0  # a materialization without values


def test_every_counted_metric_is_in_the_catalog_and_a_plugin_cannot_name_another():
    names = {spec.name for spec in METRICS}
    assert {f"bridge_{name}_total" for name in COUNTED_METRICS} <= names
    assert all(name.startswith("bridge_") for name in names)
    with pytest.raises(ValueError, match=r"\['records_lost'\]"):
        ReportKeys("records", read="r", delivered="d", lag=None, rejected=(), counted=(("records_lost", "lost"),))


def _bridge(name: str) -> Bridge:
    plugin = plugin_for("CloudPubSubSinkConnector")
    config = plugin.config_model.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "t"})
    return Bridge(name, plugin, config, BatchSettings(), SensorSettings(), checks=CheckSettings(max_lag=10))


def _sample(metrics: BridgeMetrics, name: str, bridge: str, **labels) -> float | None:
    return metrics.registry.get_sample_value(name, {"bridge": bridge, "connector": "CloudPubSubSinkConnector",
                                                    "group": "bridges", **labels})


def test_the_reader_counts_each_event_once_and_keeps_the_newest_lag():
    bridge = _bridge("orders")
    metrics = BridgeMetrics()
    clock = [1000.0]
    with DagsterInstance.ephemeral() as instance:
        reader = EventReader(instance, metrics, clock=lambda: clock[0])
        assert reader.read([bridge]) == 0
        assert _sample(metrics, "bridge_records_delivered_total", "orders") == 0  # there before the first batch
        assert _sample(metrics, "bridge_lag_max_records", "orders") == 10

        def batch(published: int, lag: int) -> None:
            instance.report_runless_asset_event(AssetMaterialization(AssetKey("orders"), metadata={
                "records_read": MetadataValue.int(published), "records_published": MetadataValue.int(published),
                "lag_remaining": MetadataValue.int(lag), "duration_seconds": MetadataValue.float(2.0)}))

        batch(3, 20)
        batch(4, 16)
        assert reader.read([bridge]) == 2
        assert reader.read([bridge]) == 0  # read again: nothing new, nothing counted twice
        assert _sample(metrics, "bridge_records_delivered_total", "orders") == 7
        assert _sample(metrics, "bridge_batch_duration_seconds_count", "orders") == 2
        assert _sample(metrics, "bridge_lag_records", "orders") == 16

        # A sensor's later reading of the lag wins over the last batch's; a failure counts once.
        key = AssetKey("orders")
        health.report(instance, key, [health.lag_evaluation(bridge, 30), health.failed_batch_evaluation("boom")])
        reader.read([bridge])
        reader.read([bridge])
        assert _sample(metrics, "bridge_lag_records", "orders") == 30
        assert _sample(metrics, "bridge_runs_failed_total", "orders") == 1
        assert _sample(metrics, "bridge_check_passed", "orders", check="batch_succeeded") == 0
        assert _sample(metrics, "bridge_check_passed", "orders", check="lag_within_bound") == 0
        clock[0] = instance.fetch_materializations(key, limit=1).records[0].timestamp + 42
        assert _sample(metrics, "bridge_position_age_seconds", "orders") == 42

        # A new reader (the endpoint started again) counts the whole history: totals over every run.
        again = BridgeMetrics()
        EventReader(instance, again).read([bridge])
        assert _sample(again, "bridge_records_delivered_total", "orders") == 7
        assert _sample(again, "bridge_runs_failed_total", "orders") == 1


def test_partition_lag_is_a_series_per_partition_only_when_asked():
    from asset_metadata import as_metadata
    from connectors.plugin import Table

    bridge = _bridge("orders")
    table = Table((("topic", "string"), ("partition", "int"), ("lag", "int")),
                  ({"topic": "t", "partition": 0, "lag": 5}, {"topic": "t", "partition": 1, "lag": 0}))
    with DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(AssetMaterialization(AssetKey("orders"), metadata=as_metadata(
            None, None, {"records_read": 1, "records_published": 1, "lag_remaining": 5, "partitions": table})))
        asked, not_asked = BridgeMetrics(), BridgeMetrics()
        EventReader(instance, asked, partition_lag=True).read([bridge])
        EventReader(instance, not_asked).read([bridge])
    assert _sample(asked, "bridge_partition_lag_records", "orders", topic="t", partition="0") == 5
    assert _sample(asked, "bridge_partition_lag_records", "orders", topic="t", partition="1") == 0
    assert _sample(not_asked, "bridge_partition_lag_records", "orders", topic="t", partition="0") is None


def test_a_sinks_latency_buckets_become_one_cumulative_histogram():
    from connectors.framework.latency import BUCKET_FIELDS, SUM_FIELD

    bridge = _bridge("orders")
    metrics = BridgeMetrics()
    with DagsterInstance.ephemeral() as instance:
        for le_50, over in ((3, 0), (1, 1)):
            buckets = {**dict.fromkeys(BUCKET_FIELDS, 0), "latency_le_50ms": le_50,
                       "latency_over_300000ms": over, SUM_FIELD: 1000 * over + 10 * le_50}
            instance.report_runless_asset_event(AssetMaterialization(AssetKey("orders"), metadata={
                "records_published": MetadataValue.int(le_50 + over),
                "delivery_latency": MetadataValue.json(buckets)}))
        EventReader(instance, metrics).read([bridge])
    assert _sample(metrics, "bridge_delivery_latency_seconds_bucket", "orders", le="0.05") == 4
    assert _sample(metrics, "bridge_delivery_latency_seconds_bucket", "orders", le="300.0") == 4
    assert _sample(metrics, "bridge_delivery_latency_seconds_bucket", "orders", le="+Inf") == 5
    assert _sample(metrics, "bridge_delivery_latency_seconds_count", "orders") == 5
    assert _sample(metrics, "bridge_delivery_latency_seconds_sum", "orders") == 1.04
