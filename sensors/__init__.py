"""One sensor per bridge, chosen by what its connector plugin declares: a continuous bridge gets a keeper, a
connector with a signal (Kafka lag, Lite backlog) a sensor that asks it (cheap admin calls, never consuming),
one without an interval sensor."""


import hashlib
import json
import time

from dagster import (
    AssetKey, DagsterInstance, DagsterRunStatus, DefaultSensorStatus, RunRequest, RunsFilter,
    SensorDefinition, SensorEvaluationContext, SkipReason, sensor,
)

from asset_metadata import recorded_position
from connectors.plugin import Bridge
import health
from jobs import HOST_TAG
from resources.lease import BridgeLeaseResource, LeaseTiming, current_holder, fence_stale
from sensors.backoff import evaluate_with_backoff
from sensors.switches import switch_name, switched_on

_SWITCH_TICK_S = 600
IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def _latest_run_id(instance: DagsterInstance, job_name: str) -> "str | None":
    records = instance.get_run_records(RunsFilter(job_name=job_name), limit=1)
    return records[0].dagster_run.run_id if records else None


def _run_in_flight(context: SensorEvaluationContext, job_name: str, bridges: list[Bridge],
                   bridge_lease: BridgeLeaseResource, whose: str = "this bridge") -> "SkipReason | None":
    """A bridge's runs never overlap: skip while one is queued or running. A run whose process died
    (its lease heartbeat stopped) is marked failed first, so it cannot hold the bridge for ever."""
    stale = fence_stale(context.instance, [bridge.name for bridge in bridges], bridge_lease.timing())
    for name, fenced in stale.items():
        if not fenced.finished:
            context.log.warning(f"run {fenced.run_id} of {name} marked failed: {fenced.stale_because}")
    records = context.instance.get_run_records(RunsFilter(job_name=job_name, statuses=IN_FLIGHT), limit=1)
    if records:
        return SkipReason(f"run {records[0].dagster_run.run_id[:8]} of {whose} is not finished")
    return None


def _sensor_properties(bridge: Bridge, job_name: str, kind: str, description: str) -> dict:
    """Name, target, interval and on/off from the bridge's `sensor:` settings."""
    return {
        "name": f"{bridge.name}_{kind}",
        "job_name": job_name,
        "minimum_interval_seconds": bridge.sensor.interval_seconds,
        "default_status": DefaultSensorStatus.RUNNING if bridge.sensor.enabled else DefaultSensorStatus.STOPPED,
        "description": description,
    }


def build_bridge_sensor(bridge: Bridge, job_name: str) -> SensorDefinition:
    if bridge.host is not None:
        return build_switch_sensor(bridge)
    if bridge.mode == "continuous":
        return build_keeper_sensor(bridge, job_name)
    if bridge.plugin.signal is None:
        return build_interval_sensor(bridge, job_name)
    return build_signal_sensor(bridge, job_name)


def build_interval_sensor(bridge: Bridge, job_name: str) -> SensorDefinition:
    """For connectors that cannot see their backlog without consuming (the Pub/Sub source: the emulator
    keeps no metrics): a run is requested on the interval whenever none is in flight."""
    return _run_when_none_in_flight(bridge, job_name, "interval_sensor",
                                    f"Starts {job_name} every interval when no run of it is in flight")


def build_keeper_sensor(bridge: Bridge, job_name: str) -> SensorDefinition:
    """For continuous bridges: keeps exactly one run alive. A run that ended (its time was up, it was
    terminated, it failed, its process died and was fenced) is followed by a new one; failed runs in a
    row are followed later and later (capped), each tick saying why."""
    return _run_when_none_in_flight(bridge, job_name, "keeper_sensor", f"Keeps one continuous run of {job_name} alive")


def _run_when_none_in_flight(bridge: Bridge, job_name: str, kind: str, description: str) -> SensorDefinition:
    @sensor(**_sensor_properties(bridge, job_name, kind, description))
    def _sensor(context: SensorEvaluationContext, bridge_lease: BridgeLeaseResource):
        if busy := _run_in_flight(context, job_name, [bridge], bridge_lease):
            return busy
        # One request per ended run: a double evaluation cannot start two.
        return evaluate_with_backoff(context, job_name, bridge.sensor.interval_seconds, lambda: RunRequest(
            run_key=f"after-{_latest_run_id(context.instance, job_name) or 'none'}", tags={"bridge": bridge.name}))

    return _sensor


def _report_health(context: SensorEvaluationContext, bridge: Bridge, lag: int) -> None:
    """The lag and freshness checks, from what the sensor asked anyway (recorded when their outcome changes)."""
    key = AssetKey(bridge.name)
    last_success = health.last_success_time(context.instance, key)
    health.report_changed(context.instance, key, [
        health.lag_evaluation(bridge, lag), health.fresh_evaluation(bridge, lag, last_success, time.time())])


def build_signal_sensor(bridge: Bridge, job_name: str) -> SensorDefinition:
    """Asks the connector's signal how much is waiting past the recorded position; starts a run if anything."""
    plugin, signal = bridge.plugin, bridge.plugin.signal
    unit = plugin.keys.unit

    @sensor(**_sensor_properties(bridge, job_name, f"{signal.name}_sensor",
                                 f"Starts {job_name} when there are {unit} the bridge has not moved yet"),
            required_resource_keys={*signal.systems, "bridge_lease"})
    def _signal_sensor(context: SensorEvaluationContext, **_resources):
        # `**_resources`: a direct call (how Dagster's docs test a sensor) passes every required resource as
        # an argument; the daemon passes none. Both reach them through context.resources.
        if busy := _run_in_flight(context, job_name, [bridge], context.resources.bridge_lease):
            return busy

        def check() -> RunRequest | SkipReason:
            recorded = recorded_position(context.instance, AssetKey(bridge.name), plugin.position)
            waiting = signal.waiting(context.resources, bridge.with_secrets(), recorded)
            _report_health(context, bridge, waiting.amount)
            if waiting.amount == 0:
                return SkipReason(f"no new {unit}")
            # Same state, same key: a double evaluation cannot start two runs, while a finished (or failed)
            # run changes the key so the backlog is tried again.
            state = json.dumps([_latest_run_id(context.instance, job_name), waiting.head], sort_keys=True, default=str)
            return RunRequest(run_key=hashlib.sha256(state.encode()).hexdigest()[:24],
                              tags={"bridge": bridge.name, f"{signal.name}_at_request": str(waiting.amount)})

        return evaluate_with_backoff(context, job_name, bridge.sensor.interval_seconds, check)

    return _signal_sensor


def build_switch_sensor(bridge: Bridge) -> SensorDefinition:
    """A hosted bridge's on/off: its host's run reads it (sensors/switches.py); the sensor itself starts nothing."""
    host = bridge.host

    # Its state is what counts, read from storage; a tick only shows where the bridge moves. Each tick costs the
    # daemon and the code server an evaluation: thirty switches at 30 s took 10 % of a core.
    @sensor(name=switch_name(bridge), minimum_interval_seconds=_SWITCH_TICK_S,
            default_status=DefaultSensorStatus.RUNNING if bridge.sensor.enabled else DefaultSensorStatus.STOPPED,
            description=f"On: host {host}'s run moves {bridge.name}; off: that run ends it after its commit")
    def _switch(context: SensorEvaluationContext):
        holder = current_holder(context.instance, bridge.name, LeaseTiming())
        if holder is not None and holder.stale_because is None:
            return SkipReason(f"on: moving in run {holder.run_id[:8]}")
        return SkipReason(f"on: host {host}'s run takes it up within seconds (its keeper starts one if none runs)")

    return _switch


def build_host_keeper(host: str, members: list[Bridge], job_name: str) -> SensorDefinition:
    """Keeps one run of the host alive while any of its bridges is switched on; failed runs in a row are
    followed later and later, as a bridge's own keeper does."""
    interval = min(b.sensor.interval_seconds for b in members)

    @sensor(name=f"host_{host}_keeper", job_name=job_name, minimum_interval_seconds=interval,
            default_status=DefaultSensorStatus.RUNNING,
            description=f"Keeps one run of host {host} alive while any of its bridges is switched on")
    def _keeper(context: SensorEvaluationContext, bridge_lease: BridgeLeaseResource):
        if busy := _run_in_flight(context, job_name, members, bridge_lease, f"host {host}"):
            return busy
        if not switched_on(context.instance, members):
            return SkipReason(f"every bridge of host {host} is switched off")
        return evaluate_with_backoff(context, job_name, interval, lambda: RunRequest(
            run_key=f"after-{_latest_run_id(context.instance, job_name) or 'none'}", tags={HOST_TAG: host}))

    return _keeper
