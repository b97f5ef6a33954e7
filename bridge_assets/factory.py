"""One software-defined asset per bridge, built from its connector plugin's declarations (connectors/plugin.py).

A materialization asked for by hand (the UI, `dg launch --assets`, `dagster asset materialize`) moves one
micro-batch of each bridge it selects, records where it got to and ends, whatever the bridge's mode. The mode says
what the bridge's automation runs: `mode: batch`, a run per micro-batch started by its sensor; `mode: continuous`
(the default), a run that keeps moving and records the position every commit interval (continuous_run.py), the
bridges naming one host sharing it. Only runs tagged to keep moving (jobs.ALWAYS_ON_TAG) do.
"""

import contextlib
import logging
import traceback
from typing import Iterator

from dagster import (
    AssetExecutionContext, AssetKey, AssetsDefinition, AssetSpec, Failure, MaterializeResult, MetadataValue, asset,
    multi_asset,
)

from asset_metadata import as_metadata, recorded_position
from bridge_assets.failures import failure_line
from bridge_assets.lineage import BridgeEnds
from connectors.endpoints import Endpoint
from connectors.plugin import Bridge, Systems
import health
from jobs import HOST_TAG, keeps_moving
from resources.lease import BridgeBusy, BridgeLease

log = logging.getLogger(__name__)


def bridge_ends(bridge: Bridge, systems: Systems) -> BridgeEnds:
    """What the bridge reads and writes, as lineage endpoints (a subscription's topic is asked with the
    bridge's own credentials, when they resolve)."""
    plugin = bridge.plugin
    try:
        asking = bridge.with_secrets()
    except ValueError as exc:
        log.warning("lineage of %s: %s", bridge.name, exc)
        asking = bridge
    return BridgeEnds(AssetKey(bridge.name), bridge.group, plugin.reads(asking, systems), plugin.writes(bridge))


def bridge_asset(bridge: Bridge, reads: tuple[Endpoint, ...] = ()) -> AssetsDefinition:
    """The asset of a bridge moved by runs of its own: a batch bridge's, or a continuous bridge naming no host."""
    if bridge.mode != "continuous":
        return _one_batch_asset(bridge, reads)
    return _continuous_assets(None, [bridge], {bridge.name: reads})


def host_asset(host: str, members: list[Bridge], reads: dict[str, tuple[Endpoint, ...]]) -> AssetsDefinition:
    """The continuous bridges of one host in one multi-asset: one step moves them all."""
    return _continuous_assets(host, members, reads)


def _describe(bridge: Bridge) -> str:
    c = bridge.continuous
    if bridge.mode == "batch":
        how = "Its sensor starts a run per micro-batch."
    else:
        where = f"host {c.host}'s run" if c.host else "a run of its own"
        how = (f"Always on: {where} moves records as they arrive" if bridge.plugin.has_stream(bridge)
               else f"Always on: {where} loops micro-batches (every {c.trigger_interval_ms} ms when idle)")
        how += f" and records its position every {c.commit_interval_ms} ms."
    return f"{bridge.connector}: {bridge.plugin.route(bridge)}. {how} Materialize moves one micro-batch and ends."


def _asset_properties(bridge: Bridge, reads: tuple[Endpoint, ...]) -> dict:
    """What every bridge asset shows: key = bridge name, its group, kinds tags, what it reads, its checks."""
    return {
        "name": bridge.name,
        "group_name": bridge.group,
        "deps": [AssetKey(endpoint.key) for endpoint in reads],
        "check_specs": health.check_specs(bridge),
        "kinds": set(bridge.plugin.kinds),
        "description": _describe(bridge),
        "tags": {"connector": bridge.connector, "mode": bridge.mode},
        "op_tags": {"bridge": bridge.name},
        "required_resource_keys": {*bridge.plugin.systems, "bridge_lease"},
    }


def busy_line(instance, bridge: Bridge, busy: BridgeBusy) -> str:
    """Why this run cannot move the bridge now, and what to do: an always-on run holding it is named as such."""
    holder = instance.get_run_by_id(busy.holder_run_id) if busy.holder_run_id else None
    if holder is None or not keeps_moving(holder.tags):
        return str(busy)
    where = (f"host {holder.tags[HOST_TAG]}'s run {holder.run_id[:8]}" if HOST_TAG in holder.tags
             else f"its own run {holder.run_id[:8]}")
    return (f"bridge {bridge.name} is always on in {where}: a batch now would move its records twice, so this run "
            f"moved nothing. Switch it off first (`bridgectl bridges stop {bridge.name}`, or its sensor in the UI); "
            "switched on again, it goes on from the position the batch records")


@contextlib.contextmanager
def _holding_lease(context: AssetExecutionContext, bridge: Bridge) -> Iterator[BridgeLease]:
    """The bridge's lease for the whole body: position read, batches moved, lease checked, result recorded."""
    try:
        timing = context.resources.bridge_lease.timing()
        lease = BridgeLease.acquire(context.instance, bridge.name, context.run_id, timing)
    except BridgeBusy as exc:
        raise Failure(description=busy_line(context.instance, bridge, exc), allow_retries=False) from None
    if lease.fenced:
        context.log.warning(f"Fenced run {lease.fenced.run_id} of bridge {bridge.name}: {lease.fenced.stale_because}")
    try:
        yield lease
    except Failure:
        raise
    except Exception as exc:  # one line naming the bridge, the system and the cause; the trace as metadata
        cause = failure_line(bridge, exc)
        try:
            health.report(context.instance, context.asset_key, [health.failed_batch_evaluation(cause)])
        except Exception as report_error:  # noqa: BLE001 - the failure's own line matters more than its check
            context.log.warning(f"could not record the failed check: {report_error!r}")
        raise Failure(description=cause, metadata={
            "trace": MetadataValue.text("".join(traceback.format_exception(exc))[-20_000:])}) from None
    finally:
        lease.release()


def move_one_batch(context: AssetExecutionContext, bridge: Bridge, named: bool = False) -> MaterializeResult:
    """One micro-batch of `bridge` from its recorded position, under its lease; `named`: the result and the log
    lines name the bridge (a step moving several)."""
    plugin, key = bridge.plugin, AssetKey(bridge.name)
    with _holding_lease(context, bridge) as lease:
        report = plugin.run_batch(context.resources, bridge.with_secrets(),
                                  recorded_position(context.instance, key, plugin.position))
        lease.check()
    prefix = f"{bridge.name}: " if named else ""
    context.log.info(prefix + report.line)
    for warning in report.warnings:
        context.log.warning(prefix + warning)
    evaluations = health.batch_evaluations(bridge, report.values)
    return MaterializeResult(asset_key=key if named else None,
                             metadata=as_metadata(plugin.position, report.position, report.values),
                             check_results=[e.result(key if named else None) for e in evaluations])


def _one_batch_asset(bridge: Bridge, reads: tuple[Endpoint, ...]) -> AssetsDefinition:
    @asset(**_asset_properties(bridge, reads))
    def _bridge(context: AssetExecutionContext) -> MaterializeResult:
        return move_one_batch(context, bridge)

    return _bridge


def host_step_name(host: str) -> str:
    return f"host_{host}"


def _continuous_assets(host: str | None, members: list[Bridge],
                       reads: dict[str, tuple[Endpoint, ...]]) -> AssetsDefinition:
    """One step moving `members` (continuous_run.py); each stays an asset of its own, any subset runnable."""
    specs, check_specs = [], []
    for bridge in members:
        properties = _asset_properties(bridge, reads.get(bridge.name, ()))
        check_specs += properties["check_specs"]
        # skippable: a host's run records a bridge only while its sensor has it on.
        specs.append(AssetSpec(key=bridge.name, group_name=properties["group_name"], deps=properties["deps"],
                               kinds=properties["kinds"], description=properties["description"],
                               tags=properties["tags"], skippable=True))
    by_key = {AssetKey(b.name): b for b in members}

    @multi_asset(
        name=host_step_name(host) if host else members[0].name, specs=specs, check_specs=check_specs,
        can_subset=True, op_tags={HOST_TAG: host} if host else {"bridge": members[0].name},
        required_resource_keys={"bridge_lease", *(s for b in members for s in b.plugin.systems)})
    def _continuous(context: AssetExecutionContext):
        selected = [by_key[key] for key in by_key if key in context.selected_asset_keys]
        if not keeps_moving(context.run.tags):  # asked for by hand: one batch each, then the run ends
            for bridge in selected:
                yield move_one_batch(context, bridge, named=True)
            return
        wanted = None
        if host is not None and context.run.tags.get(HOST_TAG) == host:
            from sensors.switches import switched_on

            wanted = lambda: switched_on(context.instance, selected)  # noqa: E731
        # Imported here: the streams' machinery brings Arrow, which a code server (it only builds the
        # definitions) would otherwise hold for nothing.
        from bridge_assets.continuous_run import ContinuousRun

        ContinuousRun(context, selected, wanted).run()
        # Every commit was recorded as it came (AssetMaterialization events): the step has no outputs to give.
        yield from ()

    return _continuous
