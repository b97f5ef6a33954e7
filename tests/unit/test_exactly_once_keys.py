"""KIP-618's keys on the connectors that have them: their defaults, their checks, and exactly once refused in a
mode where it is not built."""

from __future__ import annotations

import pytest
import yaml

from connectors.config.bridges_file import BridgeConfigError, load_bridges
from connectors.pubsublite_source.config import PubSubLiteSourceConfig

LITE_SOURCE = {"pubsublite.project": "p", "pubsublite.location": "us-central1-a", "pubsublite.subscription": "s",
               "kafka.topic": "t"}


def bridges_file(tmp_path, config: dict, mode: str = "batch") -> str:
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": "lite_in", "connector": "PubSubLiteSourceConnector",
                                                 "mode": mode, "config": {**LITE_SOURCE, **config}}]}))
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


def test_exactly_once_is_refused_where_it_is_not_built(tmp_path):
    with pytest.raises(BridgeConfigError, match="has it in batch so far, not in mode continuous"):
        load_bridges(bridges_file(tmp_path, {"exactly.once.support": "required"}, mode="continuous"))
    assert load_bridges(bridges_file(tmp_path, {"exactly.once.support": "required"}))[0].config.exactly_once
