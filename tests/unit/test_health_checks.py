"""The asset checks' outcomes from batch metadata and sensor readings (pure logic)."""

from __future__ import annotations

import textwrap

from dagster import MetadataValue

import health
from bridge_assets.runners import CLOUD_PUBSUB_SINK, CLOUD_PUBSUB_SOURCE
from connectors.config.bridges_file import load_bridges


def bridge(tmp_path, checks: str = ""):
    path = tmp_path / "bridges.yaml"
    path.write_text(textwrap.dedent(f"""\
        bridges:
          - name: b
            connector: CloudPubSubSinkConnector
            config: {{topics: t, cps.project: p, cps.topic: t}}
            batch: {{max_records: 50}}
            {checks}
        """))
    [loaded] = load_bridges(path)
    return loaded


def test_freshness_counts_only_while_records_wait(tmp_path):
    b, signals = bridge(tmp_path, "checks: {max_age_minutes: 2}"), CLOUD_PUBSUB_SINK.health
    assert health.fresh_evaluation(b, signals, lag=0, last_success=None, now=1000).passed  # idle is fresh
    assert health.fresh_evaluation(b, signals, lag=5, last_success=None, now=1000) is None  # no batch yet
    assert health.fresh_evaluation(b, signals, lag=5, last_success=1000 - 119, now=1000).passed
    stale = health.fresh_evaluation(b, signals, lag=5, last_success=1000 - 121, now=1000)
    assert not stale.passed and stale.description == "5 records waiting; last successful batch 2.0 minutes ago, over 2"


def test_lag_bound_defaults_to_one_batch(tmp_path):
    b, signals = bridge(tmp_path), CLOUD_PUBSUB_SINK.health
    assert health.lag_evaluation(b, signals, 50).passed and not health.lag_evaluation(b, signals, 51).passed


def test_a_batch_names_what_it_dead_lettered_and_a_source_has_no_lag_check(tmp_path):
    b = bridge(tmp_path)
    metadata = {"lag_remaining": MetadataValue.int(0), "records_dead_lettered": MetadataValue.int(2),
                "records_dropped": MetadataValue.int(0), "records_dead_letter_refused": MetadataValue.int(1)}
    outcomes = {e.check: e for e in health.batch_evaluations(b, CLOUD_PUBSUB_SINK.health, metadata)}
    dead = outcomes["no_new_dead_letters"]
    assert not dead.passed and dead.description == "2 records dead lettered, 1 records dead letter refused"
    source = health.batch_evaluations(b, CLOUD_PUBSUB_SOURCE.health, {"messages_dropped": MetadataValue.int(0)})
    assert [e.check for e in source] == ["batch_succeeded", "no_new_dead_letters"]
    assert [s.name for s in health.check_specs(b, CLOUD_PUBSUB_SOURCE.health)] == ["batch_succeeded",
                                                                                   "no_new_dead_letters"]
