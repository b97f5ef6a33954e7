"""A bridge's health as asset checks: the UI shows at a glance which bridge is behind, losing records to
dead letters, stale, or failing.

- `batch_succeeded`: the latest batch (or continuous run) ended without an error; a failure's one-line
  cause is the check's description.
- `lag_within_bound`: what the bridge has not moved yet (Kafka lag, Lite backlog) is at most
  `checks.max_lag`. Not for the Cloud Pub/Sub source: Pub/Sub shows no backlog without Cloud Monitoring.
- `no_new_dead_letters`: the latest batch sent nothing to the dead-letter topic, dropped or skipped nothing
  for an error.
- `fresh`: when there is something to move, the last successful batch is younger than
  `checks.max_age_minutes` (a bridge with nothing to move is fresh, however long ago it last ran; Dagster's
  freshness policy counts only materializations, so it would call an idle bridge stale).

Runs evaluate the checks from the metadata they record; sensors evaluate lag and freshness from the offsets
they ask for anyway, and report only what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from dagster import (
    AssetCheckEvaluation, AssetCheckKey, AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, AssetKey,
    DagsterInstance, MetadataValue,
)

from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,  # not exported at the top level (dagster 1.13)
)

from connectors.plugin import Bridge

BATCH_SUCCEEDED = "batch_succeeded"
LAG_WITHIN_BOUND = "lag_within_bound"
NO_NEW_DEAD_LETTERS = "no_new_dead_letters"
FRESH = "fresh"


@dataclass(frozen=True)
class Evaluation:
    check: str
    passed: bool
    description: str
    metadata: Mapping[str, Any]
    severity: AssetCheckSeverity = AssetCheckSeverity.WARN

    def result(self, asset_key: AssetKey | None = None) -> AssetCheckResult:
        """As a step's result; `asset_key` names the asset in a step of several."""
        return AssetCheckResult(asset_key=asset_key, check_name=self.check, passed=self.passed,
                                description=self.description, metadata=dict(self.metadata), severity=self.severity)

    def reported(self, asset_key: AssetKey,
                 target: AssetCheckEvaluationTargetMaterializationData | None) -> AssetCheckEvaluation:
        return AssetCheckEvaluation(asset_key=asset_key, check_name=self.check, passed=self.passed,
                                    description=self.description, metadata=dict(self.metadata),
                                    severity=self.severity, target_materialization_data=target)


def check_specs(bridge: Bridge) -> list[AssetCheckSpec]:
    keys = bridge.plugin.keys
    asset = AssetKey(bridge.name)
    specs = [AssetCheckSpec(BATCH_SUCCEEDED, asset=asset, description="The latest batch ended without an error")]
    if keys.lag:
        specs += [
            AssetCheckSpec(LAG_WITHIN_BOUND, asset=asset,
                           description=f"At most {bridge.max_lag} {keys.unit} not moved yet (checks.max_lag)"),
            AssetCheckSpec(FRESH, asset=asset, description=(
                f"With {keys.unit} to move, the last successful batch is at most "
                f"{bridge.checks.max_age_minutes:g} minutes old (checks.max_age_minutes)")),
        ]
    specs.append(AssetCheckSpec(NO_NEW_DEAD_LETTERS, asset=asset,
                                description="The latest batch dead-lettered, dropped or skipped no record for an error"))
    return specs


def lag_evaluation(bridge: Bridge, lag: int) -> Evaluation:
    keys = bridge.plugin.keys
    passed = lag <= bridge.max_lag
    return Evaluation(LAG_WITHIN_BOUND, passed,
                      f"{lag} {keys.unit} not moved yet ({'within' if passed else 'over'} the bound of "
                      f"{bridge.max_lag})", {"lag": MetadataValue.int(lag), "max_lag": MetadataValue.int(bridge.max_lag)})


def fresh_evaluation(bridge: Bridge, lag: int, last_success: float | None, now: float) -> Evaluation | None:
    """None when it cannot be told yet: records waiting, and no batch has succeeded so far."""
    keys = bridge.plugin.keys
    max_age_s = bridge.checks.max_age_minutes * 60
    if lag == 0:
        return Evaluation(FRESH, True, "nothing to move", {"lag": MetadataValue.int(0)})
    if last_success is None:
        return None
    age_s = now - last_success
    passed = age_s <= max_age_s
    return Evaluation(FRESH, passed, (
        f"{lag} {keys.unit} waiting; last successful batch {age_s / 60:.1f} minutes ago"
        + ("" if passed else f", over {bridge.checks.max_age_minutes:g}")),
        {"lag": MetadataValue.int(lag), "minutes_since_last_success": MetadataValue.float(round(age_s / 60, 2))})


def batch_evaluations(bridge: Bridge, values: Mapping[str, Any]) -> list[Evaluation]:
    """The checks of a batch (or a continuous run's commit) that succeeded, from the values it reports."""
    keys = bridge.plugin.keys
    evaluations = [Evaluation(BATCH_SUCCEEDED, True, "the latest batch succeeded", {}, AssetCheckSeverity.ERROR)]
    if keys.lag:
        lag = int(values[keys.lag])
        evaluations += [lag_evaluation(bridge, lag),
                        Evaluation(FRESH, True, "a batch just succeeded", {"lag": MetadataValue.int(lag)})]
    rejected = {name: int(values[name]) for name in keys.rejected if values[name]}
    evaluations.append(Evaluation(
        NO_NEW_DEAD_LETTERS, not rejected,
        ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in rejected.items()) or "none",
        {name: MetadataValue.int(n) for name, n in rejected.items()}))
    return evaluations


def caught_up(bridge: Bridge, values: Mapping[str, Any]) -> bool:
    """Nothing left to move (a connector that sees its lag): a bridge that failed and is back has nothing to prove."""
    keys = bridge.plugin.keys
    return keys.lag is not None and int(values.get(keys.lag, -1)) == 0


def failed_batch_evaluation(cause: str) -> Evaluation:
    return Evaluation(BATCH_SUCCEEDED, False, cause, {}, AssetCheckSeverity.ERROR)


def report(instance: DagsterInstance, asset_key: AssetKey, evaluations: list[Evaluation]) -> None:
    """Record evaluations made outside a step's own results (a continuous run's commits, a failure). Each
    names the asset's latest materialization as what it judges: the UI shows a check's result only for
    that one."""
    if not evaluations:
        return
    records = instance.fetch_materializations(asset_key, limit=1).records
    target = (AssetCheckEvaluationTargetMaterializationData(
        storage_id=records[0].storage_id, run_id=records[0].run_id, timestamp=records[0].timestamp)
        if records else None)
    for evaluation in evaluations:
        instance.report_runless_asset_event(evaluation.reported(asset_key, target))


def report_changed(instance: DagsterInstance, asset_key: AssetKey, evaluations: list[Evaluation | None]) -> None:
    """Record the evaluations whose outcome differs from the check's latest one (a sensor asks every few
    seconds; an unchanged outcome is not worth an event each time)."""
    evaluations = [e for e in evaluations if e is not None]
    keys = [AssetCheckKey(asset_key, e.check) for e in evaluations]
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
    report(instance, asset_key, [
        evaluation for key, evaluation in zip(keys, evaluations)
        if (previous := _evaluation_of(latest.get(key))) is None or previous.passed != evaluation.passed])


def _evaluation_of(record) -> AssetCheckEvaluation | None:
    return record.event.asset_check_evaluation if record is not None and record.event is not None else None


def last_success_time(instance: DagsterInstance, asset_key: AssetKey) -> float | None:
    event = instance.get_latest_materialization_event(asset_key)
    return event.timestamp if event else None
