"""The plugin interface without servers: discovery through entry points, and a connector declared in a test
(a counter that "moves" numbers) made into an asset, a job's materializations and a sensor by the same
Dagster layer as the five shipped connectors."""

from __future__ import annotations

import dataclasses
from importlib.metadata import EntryPoint

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, build_sensor_context, materialize
from pydantic import Field

from asset_metadata import recorded_position
from bridge_assets.factory import bridge_asset
from connectors import plugins
from connectors.bridge import BatchSettings, SensorSettings
from connectors.bridges_file import load_bridges
from connectors.config.common import ConnectorConfig
from connectors.plugin import BatchReport, Bridge, ConnectorPlugin, Position, ReportKeys, Signal, Waiting
from resources.lease import BridgeLeaseResource
from sensors import build_bridge_sensor


class CounterConfig(ConnectorConfig):
    up_to: int = Field(alias="up.to")


class Counter:
    """The shared system of the test connector: where the numbers end, and the batches it was asked for."""

    def __init__(self, head: int):
        self.head, self.asked_from = head, []


def _move(systems, bridge: Bridge, position: int) -> BatchReport:
    systems.counter.asked_from.append(position)
    end = min(systems.counter.head, position + bridge.config.up_to)
    return BatchReport(end - position, end, {"numbers_moved": end - position, "lag_remaining": systems.counter.head - end},
                       ("numbers_moved",), f"moved {position}..{end}")


COUNTER = ConnectorPlugin(
    name="CounterConnector", java_class="test.CounterConnector", config_model=CounterConfig, kinds=("test",),
    systems=("counter",), route=lambda bridge: "numbers -> nowhere", run_batch=_move,
    position=Position("counter_position", lambda at: at, lambda value: value or 0),
    signal=Signal("lag", ("counter",), lambda systems, bridge, at: Waiting(systems.counter.head - at,
                                                                           systems.counter.head)),
    reads=lambda bridge, systems: (), writes=lambda bridge: (), keys=ReportKeys("numbers", read="numbers_moved", delivered="numbers_moved", lag="lag_remaining", rejected=()))


def counter_bridge() -> Bridge:
    return Bridge("count_me", COUNTER, CounterConfig.model_validate({"up.to": 10}), BatchSettings(), SensorSettings())


def test_the_five_connectors_are_found_by_name_and_by_java_class():
    installed = plugins.installed_plugins()
    assert {"CloudPubSubSinkConnector", "CloudPubSubSourceConnector", "PubSubLiteSinkConnector",
            "PubSubLiteSourceConnector", "S3BlockGzipSinkConnector"} <= set(installed)
    for plugin in installed.values():
        assert plugins.plugin_for(plugin.java_class) is plugin and plugins.plugin_for(plugin.name) is plugin


@pytest.mark.parametrize("value, problem", [
    ("tests.unit.test_connector_plugins:Counter", "is a type, not a ConnectorPlugin"),
    ("tests.unit.no_such_module:CONNECTOR", "does not load: ModuleNotFoundError"),
])
def test_a_broken_plugin_is_named_in_one_line(monkeypatch, value, problem):
    point = EntryPoint("Broken", value, "kafka_pubsub_bridge.connectors")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [point])
    plugins.installed_plugins.cache_clear()
    try:
        with pytest.raises(plugins.PluginError, match=problem) as error:
            plugins.installed_plugins()
        assert f"entry point Broken = {value}" in str(error.value)
    finally:
        plugins.installed_plugins.cache_clear()


def test_the_shipped_bridges_file_loads(monkeypatch):
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://127.0.0.1:18081/apis/ccompat/v7")  # as the local stack sets it
    bridges = load_bridges("bridges.yaml")
    assert len(bridges) >= 5 and {b.connector for b in bridges} == set(plugins.installed_plugins()) & {
        b.connector for b in bridges}


def test_a_plugin_bridge_records_its_position_and_resumes_from_it():
    asset, counter = bridge_asset(counter_bridge()), Counter(head=25)
    resources = {"counter": counter, "bridge_lease": BridgeLeaseResource()}
    with DagsterInstance.ephemeral() as instance:
        for _ in range(3):
            result = materialize([asset], resources=resources, instance=instance)
        metadata = result.asset_materializations_for_node("count_me")[0].metadata
        assert counter.asked_from == [0, 10, 20]
        assert recorded_position(instance, AssetKey("count_me"), COUNTER.position) == 25
        assert metadata["numbers_moved"].value == 5 and metadata["lag_remaining"].value == 0
        checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
        assert checks == {"batch_succeeded": True, "lag_within_bound": True, "fresh": True,
                          "no_new_dead_letters": True}


def test_the_plugin_signal_drives_the_sensor():
    sensor = build_bridge_sensor(counter_bridge(), "count_me_job")
    assert sensor.name == "count_me_lag_sensor"
    counter = Counter(head=0)
    with DagsterInstance.ephemeral() as instance:
        def context():
            return build_sensor_context(instance=instance,
                                        resources={"counter": counter, "bridge_lease": BridgeLeaseResource()})

        def evaluate():  # as the daemon does
            return sensor.evaluate_tick(context())

        idle = evaluate()
        assert not idle.run_requests and idle.skip_message == "no new numbers"
        counter.head = 7
        [first], [again] = evaluate().run_requests, evaluate().run_requests
        assert first.tags["lag_at_request"] == "7"
        assert again.run_key == first.run_key  # same state, same key: one run however often it is asked
        counter.head = 9
        assert evaluate().run_requests[0].run_key != first.run_key
        assert sensor(context()).run_key == evaluate().run_requests[0].run_key  # a direct call, as tests make


@pytest.mark.parametrize("keys", [
    {},  # MirrorMaker 2's consumer-group checkpoints by default: from where the stream's records landed
    {"emit.checkpoints.enabled": "false"},
    {"target.partition": "key"},
])
def test_a_kafka_sink_streams_in_continuous_mode_with_or_without_checkpoints(tmp_path, keys):
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": "replica", "connector": "KafkaSinkConnector", "mode": "continuous",
                                                 "config": {"topics": "orders", "target.bootstrap.servers": "t:9092",
                                                            **keys}}]}))
    [bridge] = load_bridges(path)
    assert bridge.plugin.has_stream(bridge)
    asset = bridge_asset(bridge)
    assert "moves records as they arrive" in asset.specs_by_key[AssetKey("replica")].description


def test_an_always_on_commit_is_a_materialization_only_when_data_moved():
    from bridge_assets.continuous import Commit
    from bridge_assets.continuous_run import _data_moved, _Member

    bridge = counter_bridge()
    latest = dataclasses.replace(bridge, batch=BatchSettings(initial_offsets="latest"))
    member = _Member(bridge, lease=None, recorded=0)  # a new bridge: the connector's empty position

    def commit(position: int, moved: int = 0) -> Commit:
        return Commit(position, {}, "", moved=moved)

    assert not _data_moved(bridge, member, commit(0))  # nothing moved anywhere
    assert not _data_moved(bridge, member, commit(5))  # a new stream's first place (earliest: found again)
    assert _data_moved(latest, member, commit(5))  # at latest it would not be found again: recorded
    assert _data_moved(bridge, member, commit(5, moved=5))
    member.committed = 5
    assert not _data_moved(bridge, member, commit(5))  # idle or failing: an observation
    assert _data_moved(bridge, member, commit(9))  # moved with its counts lost (a stream that failed): recorded
    restarted = _Member(bridge, lease=None, recorded=5)
    assert _data_moved(bridge, restarted, commit(9)) and not _data_moved(bridge, restarted, commit(5))
