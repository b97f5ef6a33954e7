"""Resetting a bridge's position: the plan (each partition's place now and after, what it replays or skips) and, when
executed, the new position recorded as an observation of the bridge's asset (the newest recorded position is where
the next run starts) with the old one beside it for an undo. Only while no run holds the bridge's lease, which the
reset holds while it writes, as Kafka Connect's offsets API (KIP-875) acts only on a stopped connector.

`bridgectl bridges offsets NAME --reset ... --execute` runs this job in the command's process against the deployment's
instance; the UI's Launchpad runs the same job (dry run by default: its plan as a table on the run)."""

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from dagster import (
    AssetKey, AssetObservation, Config, DagsterEventType, DagsterInstance, DagsterRunStatus, Failure, MetadataValue,
    OpExecutionContext, RunsFilter, TableColumn, TableRecord, TableSchema, in_process_executor, job, op,
)
from pydantic import Field

from asset_metadata import position_record
from connectors.bridges_file import load_bridges
from connectors.plugin import Bridge, Systems
from connectors.position_reset import PlannedMove, PlannedSeek, ResetRefused, ResetTarget, plan_reset, plan_seek
from resources.lease import BridgeBusy, BridgeLease, BridgeLeaseResource

POSITION_RESET_JOB = "bridge_position_reset"
RESET_TAG = "bridge-position-reset"  # the bridge whose position a run of the job resets
RESET_METADATA = "position_reset"  # on the observation: the positions before and after, who asked and why


@dataclass(frozen=True)
class ResetPlan:
    bridge: str
    before: Any  # the recorded position now
    after: Any  # the position the reset records
    moves: tuple[PlannedMove, ...]
    seek: PlannedSeek | None = None  # a subscription's seek instead of moves (the Cloud Pub/Sub source)
    warning: str | None = None  # what the user should know before executing it

    def rows(self) -> list[dict[str, Any]]:
        return [{"source": m.source, "partition": m.partition, "now": m.now, "new": m.new, "replays": m.replays,
                 "skips": m.skips} for m in self.moves]


def resettable(bridge: Bridge) -> None:
    """Raises ResetRefused when the bridge's position cannot be reset, saying why."""
    position = bridge.plugin.position
    if bridge.plugin.seek is None and (position is None or position.source is None):
        raise ResetRefused(f"bridge {bridge.name}: {bridge.connector} keeps no position of its own to reset "
                           f"({bridge.plugin.route(bridge)})")
    seek = bridge.plugin.seek
    moves_transactions = (seek.after_seek_in_transactions is not None if seek is not None else
                          position is not None and position.source is not None and position.source.moves_transactions)
    if bridge.exactly_once and not moves_transactions:
        raise ResetRefused(f"bridge {bridge.name}: a reset of a {bridge.connector} under exactly.once.support=required "
                           "is not built yet (its Kafka transactions keep what it delivered, and a reset does not move "
                           "them for this connector)")


def plan_position_reset(instance: DagsterInstance, bridge: Bridge, systems: Systems,
                        target: ResetTarget | None) -> ResetPlan:
    """What a reset to `target` (None: undo the last reset) would do; raises ResetRefused naming what is wrong."""
    resettable(bridge)
    if bridge.plugin.seek is not None:
        return _plan_subscription_seek(instance, bridge, systems, target)
    position = bridge.plugin.position
    source, secret_bridge = position.source, bridge.with_secrets()
    before = position_record(instance, AssetKey(bridge.name), position).value
    places = source.places(systems, secret_bridge, before)
    if target is None:  # undo: each partition the position before the last reset names, back to its offset there
        earlier = source.places(systems, secret_bridge, position.from_json(_last_reset(instance, bridge)["before"]))
        offsets = {f"{p.source}:{p.partition}": p.recorded for p in earlier if p.recorded is not None}
        if not offsets:
            raise ResetRefused(f"bridge {bridge.name}: before its last reset nothing was recorded; nothing to put back")
        target = ResetTarget(to="offsets", offsets=offsets)
    offsets_at = None
    if source.offsets_at is not None:
        offsets_at = lambda epoch_ms: source.offsets_at(systems, secret_bridge, epoch_ms)  # noqa: E731
    moves = plan_reset(places, target, offsets_at)
    after = source.moved(before, {(m.source, m.partition): m.new for m in moves})
    return ResetPlan(bridge.name, before, after, moves)


def _plan_subscription_seek(instance: DagsterInstance, bridge: Bridge, systems: Systems,
                            target: ResetTarget | None) -> ResetPlan:
    """A seek of the subscription after a snapshot of it; an undo seeks to the snapshot the last reset took."""
    seek, secret_bridge = bridge.plugin.seek, bridge.with_secrets()
    # A snapshot id starts with a letter (a bridge name may start with "_").
    snapshot_first = seek.snapshot_path(bridge, f"before-reset-{bridge.name}-"
                                                f"{datetime.now(timezone.utc).strftime('%Y%m%dt%H%M%S')}")
    if target is None:
        target = ResetTarget(to="snapshot", snapshot=_last_reset(instance, bridge)["before"]["snapshot"])
    planned = plan_seek(target, seek.subscription(bridge), snapshot_first, lambda name: seek.snapshot_path(bridge, name))
    warning = None
    if planned.to_time_ms is not None and target.to != "latest" and not seek.retains_acked(systems, secret_bridge):
        warning = (f"{planned.subscription} does not retain acked messages (retain_acked_messages), nor does its "
                   "topic (message_retention_duration): a seek back brings back only messages not acked yet")
    return ResetPlan(bridge.name, None, None, (), planned, warning)


def _last_reset(instance: DagsterInstance, bridge: Bridge) -> dict[str, Any]:
    """What the bridge's last executed reset recorded (`before`, `after`, ...); ResetRefused when it never had one."""
    records = instance.get_run_records(RunsFilter(job_name=POSITION_RESET_JOB, tags={RESET_TAG: bridge.name},
                                                  statuses=[DagsterRunStatus.SUCCESS]), limit=100)
    for record in records:
        for entry in instance.all_logs(record.dagster_run.run_id, of_type=DagsterEventType.ASSET_OBSERVATION):
            observation = entry.asset_observation
            if observation is not None and RESET_METADATA in observation.metadata:
                return observation.metadata[RESET_METADATA].value
    raise ResetRefused(f"bridge {bridge.name}: no reset to undo (none was executed)")


def _table(rows: list[dict[str, Any]]) -> MetadataValue:
    columns = [TableColumn("source", "string"), *(TableColumn(name, "int") for name in
                                                  ("partition", "now", "new", "replays", "skips"))]
    return MetadataValue.table([TableRecord(row) for row in rows], TableSchema(columns=columns))


class PositionResetConfig(Config):
    bridge: str = Field(description="the bridge whose position moves (stopped: no run may hold its lease)")
    to: Literal["earliest", "latest", "datetime", "shift", "offsets", "snapshot", "undo"] = Field(
        description="earliest, latest, datetime (`at`), shift (`shift_by`), offsets (`offsets`), snapshot "
                    "(`snapshot`, a Cloud Pub/Sub source's), or undo: the position from before the last executed reset")
    at: str | None = Field(None, description="for datetime: an ISO 8601 time (UTC unless it names a zone)")
    shift_by: int | None = Field(None, description="for shift: records forward (negative: replay)")
    offsets: dict[str, int] = Field(default_factory=dict, description="for offsets: source:partition (or partition) "
                                                                      "-> the next offset to read")
    partitions: list[str] = Field(default_factory=list, description="only these partitions (all when empty)")
    clamp: bool = Field(False, description="move an offset outside what the source keeps to its nearest end")
    snapshot: str | None = Field(None, description="for snapshot: a Pub/Sub snapshot id (or its path) of the "
                                                   "subscription's topic")
    execute: bool = Field(False, description="do it; false (the default) only shows the plan")
    reason: str = Field("", description="why, kept with the reset in the asset's history")

    def target(self) -> ResetTarget | None:
        if self.to == "undo":
            return None
        at = datetime.fromisoformat(self.at) if self.at else None
        return ResetTarget(to=self.to, at=at, shift_by=self.shift_by, offsets=self.offsets,
                           partitions=tuple(self.partitions), clamp=self.clamp, snapshot=self.snapshot)


@op(description="Plan a bridge's position reset and, with execute, record it", required_resource_keys={
    "kafka", "pubsub", "pubsublite", "bridge_lease"})
def reset_bridge_position(context: OpExecutionContext, config: PositionResetConfig) -> None:
    bridges = {b.name: b for b in load_bridges()}
    if config.bridge not in bridges:
        raise Failure(description=f"no bridge named {config.bridge!r}; there are: {', '.join(sorted(bridges))}")
    bridge, instance = bridges[config.bridge], context.instance
    lease = None
    try:
        if config.execute:
            lease_resource: BridgeLeaseResource = context.resources.bridge_lease
            lease = BridgeLease.acquire(instance, bridge.name, context.run_id, lease_resource.timing())
        plan = plan_position_reset(instance, bridge, context.resources, config.target())
        if plan.seek is not None:
            metadata: dict[str, Any] = {"plan": plan.seek.describe()}
        else:
            metadata = {"plan": _table(plan.rows()), "replays": sum(m.replays for m in plan.moves),
                        "skips": sum(m.skips for m in plan.moves)}
        if plan.warning:
            metadata["warning"] = plan.warning
        if config.execute:
            # The run is found by its tag for an undo, however it was launched (the CLI, the Launchpad).
            instance.add_run_tags(context.run_id, {RESET_TAG: bridge.name})
            record_reset(context, bridge, plan, config)
        context.add_output_metadata(metadata)
    except BridgeBusy as exc:
        raise Failure(description=f"bridge {bridge.name} is running (run {exc.holder_run_id}): stop it first "
                                  f"(bridgectl bridges stop {bridge.name}, or its sensor off in the UI): a batch lets "
                                  "go when it ends, an always-on run at its next commit; nothing was changed") from None
    except ResetRefused as exc:
        raise Failure(description=f"{exc}; nothing was changed") from None
    finally:
        if lease is not None:
            lease.release(free_slot=True)


def record_reset(context: OpExecutionContext, bridge: Bridge, plan: ResetPlan, config: PositionResetConfig) -> None:
    """The Connect group first (the place a run would otherwise resume past), then the recorded position."""
    if plan.seek is not None:
        _seek_subscription(context, bridge, plan, config)
        return
    position = bridge.plugin.position
    if position.source.mirror is not None:
        position.source.mirror(context.resources, bridge.with_secrets(), plan.after)
    lag_key = bridge.plugin.keys.lag
    places = position.source.places(context.resources, bridge.with_secrets(), plan.after)
    metadata: dict[str, MetadataValue] = {
        position.metadata_key: MetadataValue.json(position.to_json(plan.after)),
        RESET_METADATA: MetadataValue.json({
            "before": position.to_json(plan.before), "after": position.to_json(plan.after), "to": config.to,
            "reason": config.reason, "replays": sum(m.replays for m in plan.moves),
            "skips": sum(m.skips for m in plan.moves), "moves": plan.rows()}),
    }
    if lag_key is not None:
        metadata[lag_key] = MetadataValue.int(sum(p.lag for p in places))
    context.log_event(AssetObservation(asset_key=AssetKey(bridge.name), metadata=metadata))
    context.log.info(f"{bridge.name}: position reset ({config.to}) recorded: replays "
                     f"{sum(m.replays for m in plan.moves):,}, skips {sum(m.skips for m in plan.moves):,}"
                     + (f"; reason: {config.reason}" if config.reason else ""))


def _seek_subscription(context: OpExecutionContext, bridge: Bridge, plan: ResetPlan,
                       config: PositionResetConfig) -> None:
    """The snapshot, then the seek, then the observation naming both (an undo seeks to that snapshot)."""
    seek, planned, secret_bridge = bridge.plugin.seek, plan.seek, bridge.with_secrets()
    seek.take_snapshot(context.resources, secret_bridge, planned.snapshot_first)
    if planned.to_snapshot is not None:
        seek.seek_to_snapshot(context.resources, secret_bridge, planned.to_snapshot)
        after = {"snapshot": planned.to_snapshot}
    else:
        seek.seek_to_time(context.resources, secret_bridge, planned.to_time_ms)
        after = {"time": datetime.fromtimestamp(planned.to_time_ms / 1000, tz=timezone.utc).isoformat()}
    if bridge.exactly_once:
        seek.after_seek_in_transactions(context.resources, secret_bridge)
    context.log_event(AssetObservation(asset_key=AssetKey(bridge.name), metadata={
        RESET_METADATA: MetadataValue.json({
            "before": {"snapshot": planned.snapshot_first}, "after": after, "to": config.to, "reason": config.reason,
            "subscription": planned.subscription, "moves": []})}))
    context.log.info(f"{bridge.name}: {planned.describe()}" + (f"; reason: {config.reason}" if config.reason else ""))


@job(name=POSITION_RESET_JOB, executor_def=in_process_executor,
     description="Show or reset a bridge's position (bridgectl bridges offsets NAME --reset); dry run by default")
def position_reset_job() -> None:
    reset_bridge_position()
