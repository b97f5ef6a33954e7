"""The sensor of a continuous bridge keeps exactly one run alive (no servers: it only reads run records)."""

from __future__ import annotations

import textwrap
import uuid

import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunRequest, SkipReason, build_sensor_context
from dagster._core.storage.dagster_run import DagsterRun

from connectors.bridges_file import load_bridges
from resources.lease import BridgeLeaseResource
from sensors import build_bridge_sensor, build_host_keeper
from sensors.switches import switched_on

JOB = "keep_me_job"


def continuous_bridge(tmp_path):
    path = tmp_path / "bridges.yaml"
    path.write_text(textwrap.dedent("""\
        bridges:
          - name: keep_me
            connector: CloudPubSubSinkConnector
            mode: continuous
            config: {topics: t, cps.project: p, cps.topic: t}
            continuous: {commit_interval_ms: 2000, host: null}  # a run of its own
        """))
    [bridge] = load_bridges(path)
    return bridge


def evaluate(instance, sensor, cursor=None):
    context = build_sensor_context(instance=instance, cursor=cursor,
                                   resources={"bridge_lease": BridgeLeaseResource()})
    return sensor(context)


def add_run(instance, status: DagsterRunStatus) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name=JOB, run_id=run_id, status=status, tags={"bridge": "keep_me"}))
    return run_id


def test_the_continuous_bridge_gets_the_keeper_sensor_and_its_settings(tmp_path):
    bridge = continuous_bridge(tmp_path)
    assert bridge.mode == "continuous" and bridge.continuous.commit_interval_ms == 2000
    assert bridge.continuous.trigger_interval_ms == 200  # the default
    assert build_bridge_sensor(bridge, JOB).name == "keep_me_keeper_sensor"


def test_one_run_is_started_and_none_while_it_lives_and_a_new_one_after_it_ended(tmp_path):
    sensor = build_bridge_sensor(continuous_bridge(tmp_path), JOB)
    with DagsterInstance.ephemeral() as instance:
        first = evaluate(instance, sensor)
        assert isinstance(first, RunRequest) and first.tags["bridge"] == "keep_me"
        running = add_run(instance, DagsterRunStatus.STARTED)
        assert isinstance(evaluate(instance, sensor), SkipReason)
        # The run ended (terminated, or its time was up): a new one, under a new key.
        instance.report_run_canceled(instance.get_run_by_id(running))
        again = evaluate(instance, sensor)
        assert isinstance(again, RunRequest) and again.run_key != first.run_key
        assert again.run_key == f"after-{running}"  # a double evaluation asks for the same run only once


def test_failed_runs_are_followed_later_and_later(tmp_path):
    sensor = build_bridge_sensor(continuous_bridge(tmp_path), JOB)
    with DagsterInstance.ephemeral() as instance:
        for _ in range(2):
            instance.report_run_failed(instance.get_run_by_id(add_run(instance, DagsterRunStatus.STARTED)))
        skipped = evaluate(instance, sensor)
        assert isinstance(skipped, SkipReason) and "the last 2 runs of this bridge failed" in skipped.skip_message


def hosted_bridges(tmp_path, enabled=(True, True)):
    path = tmp_path / "hosted.yaml"
    path.write_text(yaml.safe_dump({"bridges": [
        {"name": f"hosted_{i}", "connector": "CloudPubSubSinkConnector", "mode": "continuous",
         "config": {"topics": "t", "cps.project": "p", "cps.topic": "t"}, "sensor": {"enabled": on},
         "continuous": {"host": "fleet"}} for i, on in enumerate(enabled)]}))
    return load_bridges(path)


def test_a_hosted_bridge_has_a_switch_and_its_host_one_keeper_for_one_run(tmp_path):
    members = hosted_bridges(tmp_path)
    assert [build_bridge_sensor(b, JOB).name for b in members] == ["hosted_0_switch", "hosted_1_switch"]
    keeper = build_host_keeper("fleet", members, "host_fleet_job")
    with DagsterInstance.local_temp(str(tmp_path)) as instance:  # sensors' states need schedule storage
        first = evaluate(instance, keeper)
        assert isinstance(first, RunRequest) and first.tags == {"bridge-host": "fleet"}
        instance.add_run(DagsterRun(job_name="host_fleet_job", run_id=str(uuid.uuid4()),
                                    status=DagsterRunStatus.STARTED, tags={"bridge-host": "fleet"}))
        assert "of host fleet is not finished" in evaluate(instance, keeper).skip_message


def test_a_host_whose_bridges_are_all_switched_off_starts_no_run(tmp_path):
    members = hosted_bridges(tmp_path, enabled=(False, False))
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        assert switched_on(instance, members) == set()
        skipped = evaluate(instance, build_host_keeper("fleet", members, "host_fleet_job"))
        assert "every bridge of host fleet is switched off" in skipped.skip_message
        assert switched_on(instance, hosted_bridges(tmp_path, enabled=(False, True))) == {"hosted_1"}


def test_a_switch_turned_on_or_off_overrides_its_default_and_a_state_back_at_its_default_does_not(tmp_path):
    from dagster._core.remote_origin import (GrpcServerCodeLocationOrigin, RemoteInstigatorOrigin,
                                             RemoteRepositoryOrigin)
    from dagster._core.scheduler.instigation import InstigatorState, InstigatorStatus, InstigatorType

    members = hosted_bridges(tmp_path, enabled=(False, True, True))
    repository = RemoteRepositoryOrigin(GrpcServerCodeLocationOrigin(host="localhost", port=4000, location_name="x"),
                                        "__repository__")
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        # hosted_0 (off by default) turned on, hosted_1 (on by default) turned off, hosted_2 reset to its default
        for name, status in (("hosted_0_switch", InstigatorStatus.RUNNING), ("hosted_1_switch", InstigatorStatus.STOPPED),
                             ("hosted_2_switch", InstigatorStatus.DECLARED_IN_CODE)):
            instance.add_instigator_state(InstigatorState(RemoteInstigatorOrigin(repository, name),
                                                          InstigatorType.SENSOR, status))
        assert switched_on(instance, members) == {"hosted_0", "hosted_2"}
