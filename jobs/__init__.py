"""One job per bridge; its `bridge` tag lets dagster.yaml allow one run per bridge at a time (queued runs;
every other launch path meets the lease in resources/lease.py)."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

from connectors.plugin import Bridge


# The tag of a host's runs (the host's name): such a run moves the host's bridges whose sensors are on.
HOST_TAG = "bridge-host"


def job_name(bridge: Bridge) -> str:
    return f"{bridge.name}_job"


def build_bridge_job(bridge: Bridge):
    return define_asset_job(
        name=job_name(bridge),
        selection=AssetSelection.assets(bridge.name),
        tags={"bridge": bridge.name},
        # One step: a subprocess per step would pay Spark's start-up twice.
        executor_def=in_process_executor,
        description=(f"Move micro-batches of bridge {bridge.name} continuously" if bridge.mode == "continuous"
                     else f"Move one micro-batch for bridge {bridge.name}"),
        # Dagster's per-event DEBUG lines drown the console of `dagster dev`; the UI keeps them all.
        config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
    )


def host_job_name(host: str) -> str:
    return f"host_{host}_job"


def build_host_job(host: str, members: list[Bridge]):
    """The run its keeper starts: every bridge of the host selected, each moved while its sensor is on."""
    return define_asset_job(
        name=host_job_name(host),
        selection=AssetSelection.assets(*(b.name for b in members)),
        tags={HOST_TAG: host},
        executor_def=in_process_executor,
        description=f"Move the bridges of host {host} that are switched on: {', '.join(b.name for b in members)}",
        config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
    )
