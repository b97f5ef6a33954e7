"""KIP-618's keys on the connectors that have them: their defaults, their checks, and exactly once refused in a
mode where it is not built."""

from __future__ import annotations

import pytest
import yaml

from connectors.bridges_file import BridgeConfigError, load_bridges
from connectors.pubsublite_source.config import PubSubLiteSourceConfig

LITE_SOURCE = {"pubsublite.project": "p", "pubsublite.location": "us-central1-a", "pubsublite.subscription": "s",
               "kafka.topic": "t"}


CLOUD_SOURCE = {"cps.project": "p", "cps.subscription": "s", "kafka.topic": "t"}


def bridges_file(tmp_path, config: dict, mode: str | None = "batch", connector: str = "PubSubLiteSourceConnector") -> str:
    base = LITE_SOURCE if connector == "PubSubLiteSourceConnector" else CLOUD_SOURCE
    entry = {"name": "lite_in", "connector": connector, "config": {**base, **config}}
    if mode is not None:
        entry["mode"] = mode
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [entry]}))
    return str(path)


def test_at_least_once_by_default_and_exactly_once_when_required():
    default = PubSubLiteSourceConfig.model_validate(LITE_SOURCE)
    assert not default.exactly_once and default.transaction_boundary == "poll"
    required = PubSubLiteSourceConfig.model_validate({**LITE_SOURCE, "exactly.once.support": "required"})
    assert required.exactly_once and required.positions_topic_name("lite_in") == "bridge-offsets.lite_in"
    named = PubSubLiteSourceConfig.model_validate({**LITE_SOURCE, "offsets.storage.topic": "positions"})
    assert named.positions_topic_name("lite_in") == "positions"


def test_bad_values_are_named(tmp_path):
    with pytest.raises(BridgeConfigError, match="exactly.once.support"):
        load_bridges(bridges_file(tmp_path, {"exactly.once.support": "always"}))
    with pytest.raises(BridgeConfigError, match="transaction.boundary"):
        load_bridges(bridges_file(tmp_path, {"transaction.boundary": "connector"}))


@pytest.fixture
def cloud_source_in_batch_only(monkeypatch):
    """The Cloud Pub/Sub source as a plugin that has exactly once in micro-batch mode only (as every connector did
    before issue #60; a third party's plugin may still)."""
    import dataclasses

    from connectors.plugins import installed_plugins

    plugins = installed_plugins()
    cloud = plugins["CloudPubSubSourceConnector"]
    monkeypatch.setitem(plugins, cloud.name, dataclasses.replace(cloud, exactly_once_modes=("batch",)))


@pytest.mark.parametrize("connector", ["PubSubLiteSourceConnector", "CloudPubSubSourceConnector"])
def test_exactly_once_is_built_always_on_and_in_batch(tmp_path, connector):
    required = {"exactly.once.support": "required"}
    for mode in ("continuous", "batch"):
        [bridge] = load_bridges(bridges_file(tmp_path, required, mode, connector))
        assert bridge.mode == mode and bridge.config.exactly_once
    [default] = load_bridges(bridges_file(tmp_path, required, None, connector))
    assert default.mode == "continuous" and default.continuous.host == "default"


def test_exactly_once_is_refused_in_a_mode_the_plugin_has_not_built(tmp_path, cloud_source_in_batch_only):
    cloud = "CloudPubSubSourceConnector"
    with pytest.raises(BridgeConfigError, match="has it in batch so far, not in mode continuous"):
        load_bridges(bridges_file(tmp_path, {"exactly.once.support": "required"}, "continuous", cloud))
    # Without a mode, such a bridge gets the mode that has it.
    [cloud_bridge] = load_bridges(bridges_file(tmp_path, {"exactly.once.support": "required"}, None, cloud))
    assert cloud_bridge.mode == "batch" and cloud_bridge.config.exactly_once
    [requested] = load_bridges(bridges_file(tmp_path, {"exactly.once.support": "requested"}, None, cloud))
    assert requested.mode == "continuous"


class _Admin:
    """What PositionsTopic.ensure asks of the admin: a cluster whose metadata may not show a topic made moments ago."""

    def __init__(self, existing: dict[str, int], shown: bool = True):
        self.existing, self.shown = dict(existing), shown

    def create_topic(self, name: str, partitions: int, config: dict) -> bool:
        if name in self.existing:
            return False
        self.existing[name] = partitions
        return True

    def ensure_partitions(self, name: str, partitions: int) -> None:
        self.existing[name] = max(self.existing[name], partitions)

    def partitions(self, names: list[str]) -> dict[str, list[int]]:
        return {n: list(range(self.existing[n])) for n in names if n in self.existing and self.shown}


def test_the_positions_topic_says_how_many_slots_it_holds_even_before_its_metadata_shows_it():
    from connectors.kafka.transactions import PositionsTopic

    topic = PositionsTopic("bridge-offsets.b", {})
    # Just made: the count asked for, whatever the metadata shows yet (a clean-clone run once failed on that).
    assert topic.ensure(_Admin({}, shown=False), 2) == 2
    # Made before by a run with more slots: their records still count.
    assert topic.ensure(_Admin({"bridge-offsets.b": 4}), 2) == 4
    # Made before with fewer: grown to the slots asked for.
    assert topic.ensure(_Admin({"bridge-offsets.b": 1}), 3) == 3


def test_the_cloud_source_refuses_streaming_pull_under_exactly_once():
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig

    keys = {"cps.project": "p", "cps.subscription": "s", "kafka.topic": "t", "exactly.once.support": "required"}
    assert CloudPubSubSourceConfig.model_validate(keys).exactly_once
    with pytest.raises(ValueError, match="exactly.once.support=required works with unary pulls only"):
        CloudPubSubSourceConfig.model_validate({**keys, "cps.streamingPull.enabled": "true"})