"""The code location: every bridge in bridges.yaml as an asset, with its job and its sensor; each host (bridges
sharing a continuous run) with its job and keeper."""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from bridge_assets.factory import bridge_ends, build_bridge_assets
from bridge_assets.lineage import external_specs
from connectors.bridges_file import load_bridges
from jobs import build_bridge_job, build_host_job, host_job_name, job_name
from jobs.lite_migration import lite_migration_job
from jobs.position_reset import position_reset_job
from resources import default_resources
from resources.on_demand import SystemsOnDemand
from sensors import build_bridge_sensor, build_host_keeper


def build_definitions(bridges_file: str | None = None) -> Definitions:
    bridges = load_bridges(bridges_file)
    resources = default_resources()
    systems = SystemsOnDemand(resources)
    ends = [bridge_ends(b, systems) for b in bridges]
    hosts: dict[str, list] = {}
    for bridge in bridges:
        if bridge.mode == "continuous" and bridge.continuous.host is not None:
            hosts.setdefault(bridge.continuous.host, []).append(bridge)
    return Definitions(
        assets=[*build_bridge_assets(bridges, ends), *external_specs(ends)],
        jobs=[*(build_bridge_job(b) for b in bridges), *(build_host_job(h, m) for h, m in hosts.items()),
              lite_migration_job, position_reset_job],
        sensors=[*(build_bridge_sensor(b, job_name(b)) for b in bridges),
                 *(build_host_keeper(h, m, host_job_name(h)) for h, m in hosts.items())],
        resources=resources,
        # Also for `dagster asset materialize` and the UI's ad hoc runs: one step per bridge, so a
        # subprocess per step would only add seconds of start-up (and a second Spark session).
        executor=in_process_executor,
    )
