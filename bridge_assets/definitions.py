"""A bridges file as Dagster definitions, read top to bottom: a bridge moved by runs of its own is its asset (with
its checks), its job and its sensor; a host (the always-on bridges sharing one run) is one multi-asset step, its
job and keeper, and per member a switch; then what every bridge shares."""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from bridge_assets.console_logger import console_logger
from bridge_assets.factory import bridge_asset, bridge_ends, host_asset
from bridge_assets.lineage import BridgeEnds, external_specs
from connectors.bridges_file import load_bridges
from connectors.endpoints import Endpoint
from connectors.plugin import Bridge
from jobs import build_bridge_job, build_host_job
from jobs.lite_migration import lite_migration_job
from jobs.position_reset import position_reset_job
from resources import default_resources
from resources.on_demand import SystemsOnDemand
from sensors import build_bridge_sensor, build_host_keeper, build_switch_sensor


def build_definitions(bridges_file: str | None = None) -> Definitions:
    bridges = load_bridges(bridges_file)
    resources = default_resources()
    systems = SystemsOnDemand(resources)
    ends = {bridge.name: bridge_ends(bridge, systems) for bridge in bridges}
    reads = {name: end.reads for name, end in ends.items()}
    hosts: dict[str, list[Bridge]] = {}
    for bridge in bridges:
        if bridge.host is not None:
            hosts.setdefault(bridge.host, []).append(bridge)
    return Definitions.merge(
        *(_own_runs(bridge, reads[bridge.name]) for bridge in bridges if bridge.host is None),
        *(_host(host, members, reads) for host, members in hosts.items()),
        _shared(list(ends.values()), resources),
    )


def _own_runs(bridge: Bridge, reads: tuple[Endpoint, ...]) -> Definitions:
    """A batch bridge (its sensor starts a run per micro-batch) or a continuous one naming no host (its keeper keeps
    its own run alive)."""
    job = build_bridge_job(bridge)
    return Definitions(assets=[bridge_asset(bridge, reads)], jobs=[job], sensors=[build_bridge_sensor(bridge, job.name)])


def _host(host: str, members: list[Bridge], reads: dict[str, tuple[Endpoint, ...]]) -> Definitions:
    """One always-on run moves the members whose switches are on. A member's batch by hand is a materialization of
    its asset (the UI, `dg launch --assets`): no job of its own, since a job of one member carries the whole host
    step's snapshot (every member's outputs and checks), and thirty such jobs made the code location's snapshot grow
    with the square of the members (2.6 MB at thirty), which Dagster's daemon reloads every minute."""
    job = build_host_job(host, members)
    return Definitions(
        assets=[host_asset(host, members, reads)],
        jobs=[job],
        sensors=[build_host_keeper(host, members, job.name), *(build_switch_sensor(bridge) for bridge in members)],
    )


def _shared(ends: list[BridgeEnds], resources: dict) -> Definitions:
    """The topics and subscriptions the bridges read and write (lineage), the jobs over every bridge, the systems."""
    return Definitions(
        assets=external_specs(ends),
        jobs=[lite_migration_job, position_reset_job],
        resources=resources,
        loggers={"console": console_logger},
        # Also for `dagster asset materialize` and the UI's ad hoc runs: one step per bridge, so a
        # subprocess per step would only add seconds of start-up (and a second Spark session).
        executor=in_process_executor,
    )
