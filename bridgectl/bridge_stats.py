"""A bridge's stats from the Dagster instance it runs in (the same records the UI reads): what it read and
delivered over a window, how fast, what it rejected, how far behind it is, its last run and its latest error.
What the values mean comes from the connector plugin's `ReportKeys`."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, DagsterEventType, DagsterInstance, RunsFilter
from dagster._core.storage.dagster_run import DagsterRunStatus

from connectors.plugin import Bridge
import health
from jobs import host_job_name, job_name

# A hosted bridge's checks looked through for its last failure (a commit every few seconds evaluates them).
_CHECKS_LOOKED_AT = 500

MAX_MATERIALIZATIONS = 10_000  # per window; a continuous run commits every few seconds


@dataclass(frozen=True)
class BridgeStats:
    bridge: str
    connector: str
    mode: str
    unit: str
    window_minutes: float
    batches: int  # materializations (batches, or a continuous run's commits) in the window
    read: int
    delivered: int
    rejected: int
    per_second: float | None  # delivered over the time spent moving
    lag: int | None  # latest known: a sensor's reading or the last batch's; None: not visible
    lag_at: float | None
    last_run: dict[str, Any] | None  # run_id, status, started, ended (epoch seconds)
    failed_runs: int  # in the window
    last_error: dict[str, Any] | None  # message, at, run_id: the latest failed run, however old

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _value(metadata: dict, name: str | None) -> float:
    entry = metadata.get(name) if name else None
    return entry.value if entry is not None and isinstance(entry.value, (int, float)) else 0


def bridge_stats(instance: DagsterInstance, bridge: Bridge, window_minutes: float = 60.0,
                 now: float | None = None) -> BridgeStats:
    now = time.time() if now is None else now
    since = now - window_minutes * 60
    keys, asset = bridge.plugin.keys, AssetKey(bridge.name)
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=asset, after_timestamp=since),
                                              limit=MAX_MATERIALIZATIONS).records
    read = delivered = rejected = 0
    seconds = 0.0
    for record in records:
        metadata = record.asset_materialization.metadata
        read += int(_value(metadata, keys.read))
        delivered += int(_value(metadata, keys.delivered))
        rejected += int(sum(_value(metadata, name) for name in keys.rejected))
        seconds += float(_value(metadata, "duration_seconds"))
    lag, lag_at = _latest_lag(instance, bridge, records[0] if records else None)
    return BridgeStats(
        bridge=bridge.name, connector=bridge.connector, mode=bridge.mode, unit=keys.unit,
        window_minutes=window_minutes, batches=len(records), read=read, delivered=delivered, rejected=rejected,
        per_second=round(delivered / seconds, 1) if seconds > 0 else None, lag=lag, lag_at=lag_at,
        last_run=_last_run(instance, bridge), failed_runs=_failed_runs(instance, bridge, since),
        last_error=_last_error(instance, bridge))


def _latest_lag(instance: DagsterInstance, bridge: Bridge, latest_materialization) -> tuple[int | None, float | None]:
    """The newer of the sensor's lag check and the last batch's own lag value."""
    if bridge.plugin.keys.lag is None:
        return None, None
    found: tuple[int | None, float | None] = (None, None)
    if latest_materialization is not None:
        metadata = latest_materialization.asset_materialization.metadata
        if bridge.plugin.keys.lag in metadata:
            found = (int(metadata[bridge.plugin.keys.lag].value), latest_materialization.timestamp)
    check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [AssetCheckKey(AssetKey(bridge.name), health.LAG_WITHIN_BOUND)]).get(
        AssetCheckKey(AssetKey(bridge.name), health.LAG_WITHIN_BOUND))
    evaluation = check.event.asset_check_evaluation if check is not None and check.event is not None else None
    if evaluation is not None and "lag" in evaluation.metadata:
        at = check.event.timestamp
        if found[1] is None or at > found[1]:
            found = (int(evaluation.metadata["lag"].value), at)
    return found


def _runs_job(bridge: Bridge) -> str:
    """The job whose runs move the bridge: its host's, for a hosted bridge."""
    host = bridge.host
    return host_job_name(host) if host else job_name(bridge)


def _last_run(instance: DagsterInstance, bridge: Bridge) -> dict[str, Any] | None:
    records = instance.get_run_records(RunsFilter(job_name=_runs_job(bridge)), limit=1)
    if not records:
        return None
    record = records[0]
    return {"run_id": record.dagster_run.run_id, "status": record.dagster_run.status.value,
            "started": record.start_time, "ended": record.end_time}


def _failed_runs(instance: DagsterInstance, bridge: Bridge, since: float) -> int:
    return instance.get_runs_count(RunsFilter(job_name=_runs_job(bridge), statuses=[DagsterRunStatus.FAILURE],
                                              updated_after=datetime.fromtimestamp(since, timezone.utc)))


def _last_error(instance: DagsterInstance, bridge: Bridge) -> dict[str, Any] | None:
    if _runs_job(bridge) != job_name(bridge):
        return _last_failed_check(instance, bridge)
    records = instance.get_run_records(RunsFilter(job_name=job_name(bridge), statuses=[DagsterRunStatus.FAILURE]),
                                       limit=1)
    if not records:
        return None
    run = records[0]
    message = None
    for entry in instance.all_logs(run.dagster_run.run_id, of_type=DagsterEventType.STEP_FAILURE):
        data = entry.dagster_event.step_failure_data
        # Our one-line failure is the step's user failure description; other errors keep their message.
        message = (data.user_failure_data.description if data.user_failure_data and data.user_failure_data.description
                   else _innermost(data.error))
    if message is None:  # the run failed outside its step (its process died and it was fenced)
        for entry in instance.all_logs(run.dagster_run.run_id, of_type=DagsterEventType.RUN_FAILURE):
            message = entry.dagster_event.message or entry.user_message
    return {"message": (message or "run failed").splitlines()[0], "at": run.end_time or run.update_timestamp.timestamp(),
            "run_id": run.dagster_run.run_id}


def _innermost(error) -> str | None:
    """Dagster wraps what a step raised ("Error occurred while executing op ..."): the cause says what happened."""
    while error is not None and (error.cause or error.context) is not None:
        error = error.cause or error.context
    return error.message.strip() if error is not None else None


def _last_failed_check(instance: DagsterInstance, bridge: Bridge) -> dict[str, Any] | None:
    """A hosted bridge's failure leaves its host's run going, which starts the bridge again later (and its first
    commit passes the check again): its last failed `batch_succeeded` evaluation says what happened."""
    key = AssetCheckKey(AssetKey(bridge.name), health.BATCH_SUCCEEDED)
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=_CHECKS_LOOKED_AT):
        evaluation = record.event.asset_check_evaluation if record.event is not None else None
        if evaluation is not None and not evaluation.passed:
            return {"message": (evaluation.description or "failed").splitlines()[0], "at": record.create_timestamp,
                    "run_id": record.run_id}
    return None
