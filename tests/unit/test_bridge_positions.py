"""What `bridgectl bridges offsets` shows, from a plugin's declarations alone: the recorded position with when and by
which run it was recorded, the plugin's places beside it, and who keeps the place of a connector that keeps none."""

from __future__ import annotations

import dataclasses

from dagster import DagsterInstance, materialize

from bridge_assets.factory import bridge_asset
from bridgectl.bridge_positions import bridge_places
from connectors.plugin import Place, SourcePlaces
from resources.lease import BridgeLeaseResource
from tests.unit.test_connector_plugins import COUNTER, Counter, counter_bridge


def _counter_places(systems, bridge, position) -> tuple[Place, ...]:
    return (Place("numbers", 0, position or None, position or 0, 0, systems.counter.head),)


PLACED = dataclasses.replace(COUNTER, position=dataclasses.replace(COUNTER.position, source=SourcePlaces(
    places=_counter_places, moved=lambda position, moves: moves[("numbers", 0)])))


def test_the_recorded_position_its_run_and_the_source_ends_side_by_side():
    bridge = dataclasses.replace(counter_bridge(), plugin=PLACED)
    asset, counter = bridge_asset(bridge), Counter(head=25)
    systems = type("Systems", (), {"counter": counter})()
    with DagsterInstance.ephemeral() as instance:
        never = bridge_places(instance, bridge, systems)
        assert (never.recorded_at, never.run_id, never.lag) == (None, None, 25)
        assert never.places == (Place("numbers", 0, None, 0, 0, 25),)

        result = materialize([asset], resources={"counter": counter, "bridge_lease": BridgeLeaseResource()},
                             instance=instance)
        counter.head = 31
        after = bridge_places(instance, bridge, systems)
        assert after.run_id == result.run_id and after.recorded_at is not None
        assert after.places == (Place("numbers", 0, 10, 10, 0, 31),) and after.lag == 21
        assert after.as_dict()["places"] == [{"source": "numbers", "partition": 0, "recorded": 10, "next": 10,
                                              "start": 0, "end": 31, "lag": 21}]
        assert after.as_dict()["lag"] == 21


def test_a_connector_that_keeps_no_position_names_who_keeps_it():
    bridge = dataclasses.replace(counter_bridge(), plugin=dataclasses.replace(COUNTER, position=None))
    with DagsterInstance.ephemeral() as instance:
        shown = bridge_places(instance, bridge, systems=None)
    assert shown.kept_by_source == "numbers -> nowhere" and shown.places == () and shown.lag == 0


def test_a_place_past_the_end_has_no_lag():
    assert Place("t", 0, 12, 12, 0, 10).lag == 0


def test_a_reset_under_exactly_once_is_refused_where_it_would_leave_the_transactions_behind(tmp_path):
    import pytest
    import yaml

    from connectors.bridges_file import load_bridges
    from connectors.position_reset import ResetRefused
    from jobs.position_reset import resettable

    required = {"exactly.once.support": "required"}
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [
        {"name": "lite", "connector": "PubSubLiteSourceConnector", "mode": "batch", "config": {
            "pubsublite.project": "p", "pubsublite.location": "us-central1-a", "pubsublite.subscription": "s",
            "kafka.topic": "t", **required}},
        {"name": "repl", "connector": "KafkaSinkConnector", "mode": "batch", "config": {
            "topics": "t", "target.bootstrap.servers": "127.0.0.1:1", **required}},
        {"name": "cps", "connector": "CloudPubSubSourceConnector", "mode": "batch", "config": {
            "cps.project": "p", "cps.subscription": "s", "kafka.topic": "t", **required}}]}))
    bridges = {bridge.name: bridge for bridge in load_bridges(path)}
    for bridge in bridges.values():
        resettable(bridge)
    cps = bridges["cps"]
    unable = dataclasses.replace(cps, plugin=dataclasses.replace(cps.plugin, seek=dataclasses.replace(
        cps.plugin.seek, after_seek_in_transactions=None)))
    with pytest.raises(ResetRefused, match="a reset of a CloudPubSubSourceConnector under "
                                           "exactly.once.support=required is not built yet"):
        resettable(unable)
