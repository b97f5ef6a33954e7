"""One job per bridge that runs on its own (batch mode, or always on with `host: null`) and one per host. A bridge's
job's `bridge` tag lets dagster.yaml allow one run per bridge at a time (queued runs;
every other launch path meets the lease in resources/lease.py)."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

from connectors.plugin import Bridge


# The tag of a host's runs (the host's name): such a run moves the host's bridges whose sensors are on.
HOST_TAG = "bridge-host"
# The tag of a run that keeps its bridges moving (a host's run, a continuous bridge's own run). A run without it (a
# materialization asked for by hand: the UI, `dg launch --assets`, `dagster asset materialize`) moves one batch
# of each bridge it selects and ends, whatever the bridge's mode.
ALWAYS_ON_TAG = "bridge-always-on"


# A run's config that names the code location's console logger (bridge_assets/console_logger.py: INFO, a bridge's
# failure as its one line). A run whose config names no logger gets Dagster's default one: every event at DEBUG, a
# failure with its stack trace; the UI keeps every event either way.
CONSOLE_LOGGER = {"loggers": {"console": {}}}


def keeps_moving(tags: dict[str, str]) -> bool:
    return tags.get(ALWAYS_ON_TAG) == "true"


def job_name(bridge: Bridge) -> str:
    return f"{bridge.name}_job"


def build_bridge_job(bridge: Bridge):
    """A continuous bridge's own job keeps it moving (its keeper starts it); any other bridge's moves one batch."""
    always_on = bridge.mode == "continuous" and bridge.host is None
    return define_asset_job(
        name=job_name(bridge),
        selection=AssetSelection.assets(bridge.name),
        tags={"bridge": bridge.name, **({ALWAYS_ON_TAG: "true"} if always_on else {})},
        # One step: a subprocess per step would pay Spark's start-up twice.
        executor_def=in_process_executor,
        description=(f"Keep bridge {bridge.name} moving (always on)" if always_on
                     else f"Move one micro-batch for bridge {bridge.name}"),
        config=CONSOLE_LOGGER,
    )


def host_job_name(host: str) -> str:
    return f"host_{host}_job"


def build_host_job(host: str, members: list[Bridge]):
    """The run its keeper starts: every bridge of the host selected, each moved while its sensor is on."""
    return define_asset_job(
        name=host_job_name(host),
        selection=AssetSelection.assets(*(b.name for b in members)),
        tags={HOST_TAG: host, ALWAYS_ON_TAG: "true"},
        executor_def=in_process_executor,
        description=f"Move the bridges of host {host} that are switched on: {', '.join(b.name for b in members)}",
        config=CONSOLE_LOGGER,
    )
