"""What the UI shows about a bridge's health: asset checks from each batch and a one-line cause for a
failed run, on the real stack."""

from __future__ import annotations

import time

import pytest
from dagster import (
    AssetCheckKey, AssetKey, AssetMaterialization, DagsterInstance, RunRequest, build_sensor_context, materialize,
)

from bridge_assets.definitions import build_definitions
from resources import PubSubResource, default_resources
from tests.e2e.helpers import create_pubsub_topic, kafka_admin, produce, sink_bridges_file

pytestmark = pytest.mark.e2e


def _latest_check(instance: DagsterInstance, name: str, check: str):
    key = AssetCheckKey(AssetKey(name), check)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
    return record.event.asset_check_evaluation if record and record.event else None


def test_a_wrong_credential_fails_with_one_line_and_a_red_check(stack, spark, tmp_path, unique):
    topic, name = f"badcred-{unique}", f"badcred_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    produce(topic, [(None, "x")])
    missing = tmp_path / "missing-key.json"
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {"gcp.credentials.file.path": str(missing)}))
    resources = default_resources()
    resources["pubsub"] = PubSubResource(emulator_host=None)  # as in production: the bridge's own credentials
    instance = DagsterInstance.ephemeral()

    result = materialize([defs.get_assets_def(name)], resources=resources, instance=instance, raise_on_error=False)

    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    description = failure.step_failure_data.user_failure_data.description
    assert description == f"bridge {name} (GCP credentials): DefaultCredentialsError: File {missing} was not found."
    trace = failure.step_failure_data.user_failure_data.metadata["trace"].value
    assert "DefaultCredentialsError" in trace and len(trace) > len(description)
    check = _latest_check(instance, name, "batch_succeeded")
    assert check is not None and not check.passed and check.description == description
    assert check.target_materialization_data is None  # the bridge never materialized


def test_each_batch_evaluates_the_checks_and_dead_letters_turn_one_red(stack, spark, tmp_path, unique):
    topic, dlq, name = f"health-{unique}", f"health-dlq-{unique}", f"health_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    kafka_admin().create_topic(dlq, partitions=1)
    create_pubsub_topic(topic)
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, {
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": False,
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}, batch={"max_records": 3},
        checks={"max_lag": 1}))
    instance = DagsterInstance.ephemeral()
    produce(topic, [(None, '"a"'), (None, '"b"'), (None, '"c"'), (None, "{bad"), (None, '"e"')])

    def one_batch() -> dict:
        result = materialize([defs.get_assets_def(name)], resources=default_resources(), instance=instance)
        [materialization] = result.asset_materializations_for_node(name)
        [row] = materialization.metadata["partitions"].value.records  # the table a person reads
        tables.append(row.data)
        return {c.check_name: c for c in result.get_asset_check_evaluations()}

    tables = []
    first = one_batch()  # a, b, c: 2 records left, over the bound of 1
    assert tables[0] == {"topic": topic, "partition": 0, "next_offset": 3, "lag": 2, "records": 3, "published": 3,
                         "dead_lettered": 0}
    assert set(first) == {"batch_succeeded", "lag_within_bound", "fresh", "no_new_dead_letters"}
    assert first["batch_succeeded"].passed and first["no_new_dead_letters"].passed and first["fresh"].passed
    assert not first["lag_within_bound"].passed
    assert first["lag_within_bound"].metadata["lag"].value == 2

    second = one_batch()  # {bad goes to the dead-letter topic, e is published: nothing left
    assert second["lag_within_bound"].passed and not second["no_new_dead_letters"].passed
    assert second["no_new_dead_letters"].metadata["records_dead_lettered"].value == 1
    assert _latest_check(instance, name, "no_new_dead_letters").passed is False


def test_the_lag_sensor_reports_lag_and_freshness_when_they_change(stack, tmp_path, unique):
    topic, name = f"sensed-{unique}", f"sensed_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    produce(topic, [(None, str(i)) for i in range(5)])
    bridge_file = sink_bridges_file(tmp_path, name, topic, checks={"max_lag": 4, "max_age_minutes": 0.001})
    defs = build_definitions(bridge_file)
    sensor = defs.resolve_sensor_def(f"{name}_lag_sensor")
    resources = default_resources()

    def evaluate(instance):
        context = build_sensor_context(instance=instance, resources={
            "kafka": resources["kafka"], "bridge_lease": resources["bridge_lease"]})
        return sensor(context)

    with DagsterInstance.ephemeral() as instance:
        assert isinstance(evaluate(instance), RunRequest)
        lag = _latest_check(instance, name, "lag_within_bound")
        assert lag is not None and not lag.passed and lag.metadata["lag"].value == 5
        assert _latest_check(instance, name, "fresh") is None  # no batch yet: nothing to compare with
        evaluate(instance)  # the same outcome is not recorded again
        assert _check_evaluations(instance, name, "lag_within_bound") == 1

        # A batch long ago (here: longer ago than 0.06 s) and records still waiting: stale.
        instance.report_runless_asset_event(AssetMaterialization(asset_key=name))
        time.sleep(0.2)
        evaluate(instance)
        fresh = _latest_check(instance, name, "fresh")
        assert fresh is not None and not fresh.passed and "5 records waiting" in fresh.description
        # It judges the latest materialization: the UI shows a check's result only for that one.
        latest = instance.fetch_materializations(AssetKey(name), limit=1).records[0]
        assert fresh.target_materialization_data.storage_id == latest.storage_id


def _check_evaluations(instance: DagsterInstance, name: str, check: str) -> int:
    history = instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(AssetKey(name), check), 100)
    return len(history)
