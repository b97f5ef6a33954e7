"""One software-defined asset per bridge, built from its connector plugin's declarations (connectors/plugin.py).

`mode: batch` (the default): a run moves one micro-batch and records where it got to.
`mode: continuous`: a run loops micro-batches and records the position every commit interval.
"""

import contextlib
import dataclasses
import logging
import threading
import traceback
from typing import Iterator

from dagster import (
    AssetExecutionContext, AssetKey, AssetMaterialization, AssetsDefinition, Failure, MaterializeResult,
    MetadataValue, asset,
)

import health
from bridge_assets.lineage import BridgeEnds
from bridge_assets.metadata import as_metadata, recorded_position
from connectors.bridge import Bridge
from connectors.endpoints import Endpoint
from connectors.errors import root_cause
from connectors.plugin import Systems
from jobs.lease import BridgeBusy, BridgeLease

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


def build_bridge_asset(bridge: Bridge, ends: BridgeEnds | None = None) -> AssetsDefinition:
    build = _continuous_asset if bridge.mode == "continuous" else _one_batch_asset
    return build(bridge, ends.reads if ends else ())


def _describe(bridge: Bridge) -> str:
    c = bridge.continuous
    if bridge.mode == "batch":
        how = "One run moves one micro-batch."
    elif bridge.plugin.open_stream is not None:
        how = "One run moves records as they arrive"
    else:
        how = f"One run loops micro-batches (every {c.trigger_interval_ms} ms when idle)"
    if bridge.mode == "continuous":
        how += f" and records its position every {c.commit_interval_ms} ms, for up to {c.max_run_minutes:g} minutes."
    return f"{bridge.connector}: {bridge.plugin.route(bridge)}. {how}"


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


@contextlib.contextmanager
def _holding_lease(context: AssetExecutionContext, bridge: Bridge) -> Iterator[BridgeLease]:
    """The bridge's lease for the whole body: position read, batches moved, lease checked, result recorded."""
    try:
        timing = context.resources.bridge_lease.timing()
        lease = BridgeLease.acquire(context.instance, bridge.name, context.run_id, timing)
    except BridgeBusy as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
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


def failure_line(bridge: Bridge, exc: BaseException) -> str:
    system, cause = root_cause(exc)
    return f"bridge {bridge.name} ({system or bridge.plugin.route(bridge)}): {cause}"


def _one_batch_asset(bridge: Bridge, reads: tuple[Endpoint, ...]) -> AssetsDefinition:
    plugin = bridge.plugin

    @asset(**_asset_properties(bridge, reads))
    def _bridge(context: AssetExecutionContext) -> MaterializeResult:
        with _holding_lease(context, bridge) as lease:
            report = plugin.run_batch(context.resources, bridge.with_secrets(),
                                      recorded_position(context.instance, context.asset_key, plugin.position))
            lease.check()
        context.log.info(report.line)
        for warning in report.warnings:
            context.log.warning(warning)
        evaluations = health.batch_evaluations(bridge, report.values)
        return MaterializeResult(metadata=as_metadata(plugin.position, report.position, report.values),
                                 check_results=[e.result() for e in evaluations])

    return _bridge


def _continuous_asset(bridge: Bridge, reads: tuple[Endpoint, ...]) -> AssetsDefinition:
    from bridge_assets.continuous import commits_until_terminated, follow_stream, loop_batches, termination_sets

    plugin = bridge.plugin
    # A micro-batch that pulls for longer than a commit interval would hold back the commits.
    looping = dataclasses.replace(bridge, batch=bridge.batch.model_copy(
        update={"max_seconds": bridge.batch.max_seconds or bridge.continuous.commit_interval_ms / 1000}))

    @asset(**_asset_properties(bridge, reads))
    def _bridge(context: AssetExecutionContext):
        systems = context.resources
        # One Spark session for the whole run, not one per micro-batch.
        session = systems.spark.batch_session(bridge.name) if "spark" in plugin.systems else contextlib.nullcontext()
        with _holding_lease(context, bridge) as lease, session:
            position = recorded_position(context.instance, context.asset_key, plugin.position)
            moving = looping.with_secrets()
            stop = threading.Event()
            if plugin.open_stream is not None:
                with termination_sets(stop):
                    stream = plugin.open_stream(systems, moving, position)
                commits = follow_stream(stream, looping.continuous, context.log.warning, stop)
            else:
                commits = loop_batches(lambda at: plugin.run_batch(systems, moving, at), plugin.watch(systems, moving),
                                       position, looping.continuous, context.log.warning, stop)
            for commit in commits_until_terminated(commits, stop):
                # A termination while a commit is checked or reported ends the loop after it, as during a
                # batch; under Dagster's own handler it would interrupt the step and lose the commit.
                with termination_sets(stop):
                    lease.check()  # a fenced run records nothing
                    context.log.info(commit.line)
                    evaluations = health.batch_evaluations(bridge, commit.values)
                    metadata = as_metadata(plugin.position, commit.position, commit.values)
                if commit.final:
                    yield MaterializeResult(metadata=metadata, check_results=[e.result() for e in evaluations])
                else:
                    # A step yields each check's result once: the commits' are recorded beside it, each
                    # judging the materialization just recorded.
                    yield AssetMaterialization(asset_key=context.asset_key, metadata=metadata)
                    with termination_sets(stop):
                        health.report(context.instance, context.asset_key, evaluations)

    return _bridge
