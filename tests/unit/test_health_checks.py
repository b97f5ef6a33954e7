"""The asset checks' outcomes from batch metadata and sensor readings (pure logic)."""

from __future__ import annotations

import textwrap

from connectors.bridges_file import load_bridges
import health


SINK = "CloudPubSubSinkConnector\n            config: {topics: t, cps.project: p, cps.topic: t}"
SOURCE = "CloudPubSubSourceConnector\n            config: {kafka.topic: t, cps.project: p, cps.subscription: s}"


def bridge(tmp_path, checks: str = "", connector: str = SINK):
    path = tmp_path / "bridges.yaml"
    path.write_text(textwrap.dedent(f"""\
        bridges:
          - name: b
            connector: {connector}
            batch: {{max_records: 50}}
            {checks}
        """))
    [loaded] = load_bridges(path)
    return loaded


def test_freshness_counts_only_while_records_wait(tmp_path):
    b = bridge(tmp_path, "checks: {max_age_minutes: 2}")
    assert health.fresh_evaluation(b, lag=0, last_success=None, now=1000).passed  # idle is fresh
    assert health.fresh_evaluation(b, lag=5, last_success=None, now=1000) is None  # no batch yet
    assert health.fresh_evaluation(b, lag=5, last_success=1000 - 119, now=1000).passed
    stale = health.fresh_evaluation(b, lag=5, last_success=1000 - 121, now=1000)
    assert not stale.passed and stale.description == "5 records waiting; last successful batch 2.0 minutes ago, over 2"


def test_lag_bound_defaults_to_one_batch(tmp_path):
    b = bridge(tmp_path)
    assert health.lag_evaluation(b, 50).passed and not health.lag_evaluation(b, 51).passed


def test_a_batch_names_what_it_dead_lettered_and_a_source_has_no_lag_check(tmp_path):
    b = bridge(tmp_path)
    values = {"lag_remaining": 0, "records_dead_lettered": 2, "records_dropped": 0, "records_dead_letter_refused": 1}
    outcomes = {e.check: e for e in health.batch_evaluations(b, values)}
    dead = outcomes["no_new_dead_letters"]
    assert not dead.passed and dead.description == "2 records dead lettered, 1 records dead letter refused"
    source = bridge(tmp_path, connector=SOURCE)
    assert [e.check for e in health.batch_evaluations(source, {"messages_dropped": 0})] == ["batch_succeeded",
                                                                                          "no_new_dead_letters"]
    assert [s.name for s in health.check_specs(source)] == ["batch_succeeded", "no_new_dead_letters"]
