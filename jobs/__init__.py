"""One job per bridge; its `bridge` tag lets dagster.yaml allow one run per bridge at a time (queued runs;
every other launch path meets the lease in jobs/lease.py)."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

from connectors.bridge import Bridge


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
