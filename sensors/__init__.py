"""One sensor per bridge. It only asks for offsets (cheap admin calls) and never consumes."""


import hashlib
import json
import time

from dagster import (
    AssetKey, DagsterInstance, DagsterRunStatus, DefaultSensorStatus, RunRequest, RunsFilter,
    SensorDefinition, SensorEvaluationContext, SkipReason, sensor,
)

import health
from jobs.lease import fence_if_stale
from sensors.backoff import evaluate_with_backoff
from sensors.recorded_offsets import recorded_kafka_offsets, recorded_lite_cursors
from connectors.config.bridges_file import Bridge
from resources.kafka import KafkaResource
from resources.lease import BridgeLeaseResource
from resources.pubsublite import PubSubLiteResource

IN_FLIGHT = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def _latest_run_id(instance: DagsterInstance, job_name: str) -> "str | None":
    records = instance.get_run_records(RunsFilter(job_name=job_name), limit=1)
    return records[0].dagster_run.run_id if records else None


def _run_in_flight(context: SensorEvaluationContext, job_name: str, bridge: Bridge,
                   bridge_lease: BridgeLeaseResource) -> "SkipReason | None":
    """A bridge's runs never overlap: skip while one is queued or running. A run whose process died
    (its lease heartbeat stopped) is marked failed first, so it cannot hold the bridge for ever."""
    fenced = fence_if_stale(context.instance, bridge.name, bridge_lease.timing())
    if fenced is not None and not fenced.finished:
        context.log.warning(f"run {fenced.run_id} of {bridge.name} marked failed: {fenced.stale_because}")
    records = context.instance.get_run_records(RunsFilter(job_name=job_name, statuses=IN_FLIGHT), limit=1)
    if records:
        return SkipReason(f"run {records[0].dagster_run.run_id[:8]} of this bridge is not finished")
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


def build_bridge_sensor(bridge: Bridge, job_name: str, signals: health.HealthSignals) -> SensorDefinition:
    if bridge.mode == "continuous":
        return build_keeper_sensor(bridge, job_name)
    if bridge.connector == "CloudPubSubSourceConnector":
        return build_interval_sensor(bridge, job_name)
    if bridge.connector == "PubSubLiteSourceConnector":
        return build_lite_backlog_sensor(bridge, job_name, signals)
    return build_kafka_lag_sensor(bridge, job_name, signals)


def build_interval_sensor(bridge: Bridge, job_name: str) -> SensorDefinition:
    """For Pub/Sub sources: the backlog is not visible without pulling (the emulator keeps no
    metrics), so a run is requested on the interval whenever none is in flight."""
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
        if busy := _run_in_flight(context, job_name, bridge, bridge_lease):
            return busy
        # One request per ended run: a double evaluation cannot start two.
        return evaluate_with_backoff(context, job_name, bridge.sensor.interval_seconds, lambda: RunRequest(
            run_key=f"after-{_latest_run_id(context.instance, job_name) or 'none'}", tags={"bridge": bridge.name}))

    return _sensor


def _report_health(context: SensorEvaluationContext, bridge: Bridge, signals: health.HealthSignals, lag: int) -> None:
    """The lag and freshness checks, from what the sensor asked anyway (recorded when their outcome changes)."""
    key = AssetKey(bridge.name)
    last_success = health.last_success_time(context.instance, key)
    health.report_changed(context.instance, key, [
        health.lag_evaluation(bridge, signals, lag),
        health.fresh_evaluation(bridge, signals, lag, last_success, time.time())])


def _request_for_position(context: SensorEvaluationContext, job_name: str, bridge: Bridge, position,
                          tags: dict[str, str]) -> RunRequest:
    # Same state, same key: a double evaluation cannot start two runs, while a finished
    # (or failed) run changes the key so the backlog is tried again.
    state = json.dumps([_latest_run_id(context.instance, job_name), position], sort_keys=True, default=str)
    return RunRequest(run_key=hashlib.sha256(state.encode()).hexdigest()[:24], tags={"bridge": bridge.name, **tags})


def build_lite_backlog_sensor(bridge: Bridge, job_name: str, signals: health.HealthSignals) -> SensorDefinition:
    """For Lite sources: head cursors against the cursors the bridge resumes from (cheap unary calls)."""

    @sensor(**_sensor_properties(bridge, job_name, "backlog_sensor",
                                 f"Starts {job_name} when Pub/Sub Lite has messages the bridge has not moved yet"))
    def _backlog_sensor(context: SensorEvaluationContext, pubsublite: PubSubLiteResource,
                        bridge_lease: BridgeLeaseResource):
        from connectors.pubsublite_source.batch import lite_positions

        if busy := _run_in_flight(context, job_name, bridge, bridge_lease):
            return busy

        def check() -> RunRequest | SkipReason:
            recorded = recorded_lite_cursors(context.instance, AssetKey(bridge.name))
            starts, heads = lite_positions(pubsublite.connection_for(bridge.config), bridge.config, recorded)
            backlog = sum(max(0, heads[p] - starts[p]) for p in heads)
            _report_health(context, bridge, signals, backlog)
            if backlog == 0:
                return SkipReason("no new messages")
            return _request_for_position(context, job_name, bridge, heads, {"backlog_at_request": str(backlog)})

        return evaluate_with_backoff(context, job_name, bridge.sensor.interval_seconds, check)

    return _backlog_sensor


def build_kafka_lag_sensor(bridge: Bridge, job_name: str, signals: health.HealthSignals) -> SensorDefinition:
    @sensor(**_sensor_properties(bridge, job_name, "lag_sensor",
                                 f"Starts {job_name} when Kafka has records the bridge has not moved yet"))
    def _lag_sensor(context: SensorEvaluationContext, kafka: KafkaResource, bridge_lease: BridgeLeaseResource):
        if busy := _run_in_flight(context, job_name, bridge, bridge_lease):
            return busy

        def check() -> RunRequest | SkipReason:
            config = bridge.config
            admin = kafka.admin()
            partitions = admin.partitions(config.topic_list() or None, config.topics_regex)
            recorded = recorded_kafka_offsets(context.instance, AssetKey(bridge.name))
            plan = admin.plan_batch(partitions, recorded, 2**62, bridge.batch.initial_offsets, bridge.consumer_group)
            _report_health(context, bridge, signals, plan.total_records)
            if plan.total_records == 0:
                return SkipReason("no new records")
            return _request_for_position(context, job_name, bridge, plan.end_offsets,
                                         {"lag_at_request": str(plan.total_records)})

        return evaluate_with_backoff(context, job_name, bridge.sensor.interval_seconds, check)

    return _lag_sensor
