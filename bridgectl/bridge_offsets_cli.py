"""`bridgectl bridges offsets NAME`: a bridge's place in its source per partition, and its reset (Positions)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Column, Table

from bridgectl.bridges_cli import FILE_OPTION, JSON_OPTION, ago, bridge_named, dagster_instance, stdout
from bridgectl.relay import say
from connectors.bridges_file import BridgeConfigError
from connectors.plugin import Bridge


@click.command()
@click.argument("name")
@click.option("--reset", is_flag=True, help="plan a move of the position (with one --to-..., --shift-by, --by-duration "
                                            "or --undo); a dry run unless --execute")
@click.option("--to-earliest", "to", flag_value="earliest", help="to the oldest offset the source keeps")
@click.option("--to-latest", "to", flag_value="latest", help="to the end: skips everything pending")
@click.option("--to-datetime", "at", metavar="ISO", help="to the first record at or after this time (UTC unless it "
                                                         "names a zone)")
@click.option("--by-duration", "duration", metavar="PT1H", help="to this long ago (ISO 8601 duration)")
@click.option("--shift-by", type=int, metavar="N", help="N records forward from where the next run starts "
                                                        "(negative: replay)")
@click.option("--to-offset", "offsets", multiple=True, metavar="[T:]P=O", help="partition P (of topic or "
                                                                               "subscription T) to offset O; repeatable")
@click.option("--to-snapshot", "snapshot", metavar="SNAPSHOT", help="a Cloud Pub/Sub source: to this snapshot of "
                                                                    "its subscription's topic")
@click.option("--partitions", metavar="[T:]P,...", help="only these partitions")
@click.option("--clamp", is_flag=True, help="an offset outside what the source keeps moves to its nearest end")
@click.option("--undo", is_flag=True, help="back to the position from before the last executed reset")
@click.option("--execute", is_flag=True, help="do it (only on a stopped bridge); without it nothing changes")
@click.option("--reason", default="", help="why, kept with the reset in the asset's history")
@FILE_OPTION
@JSON_OPTION
def offsets(name: str, reset: bool, to: str | None, at: str | None, duration: str | None, shift_by: int | None,
            offsets: tuple[str, ...], snapshot: str | None, partitions: str | None, clamp: bool, undo: bool,
            execute: bool, reason: str, path: Path | None, as_json: bool) -> None:
    """The bridge's recorded position per partition beside where its source starts and ends, and the lag; with
    --reset, a move of it (a dry run unless --execute)."""
    from bridgectl.bridge_positions import bridge_places
    from connectors.kafka.connection import client_logger
    from resources import default_resources
    from resources.on_demand import SystemsOnDemand

    bridge = bridge_named(path, name)
    reset_config = _reset_config(name, reset, to, at, duration, shift_by, offsets, snapshot, partitions, clamp, undo,
                                 reason)
    client_logger().setLevel(logging.CRITICAL)  # a client that cannot connect fails the command in one line
    with dagster_instance() as instance:
        if reset_config is not None:
            _reset(instance, bridge, path, reset_config, execute, as_json)
            return
        places = bridge_places(instance, bridge, SystemsOnDemand(default_resources()))
    if as_json:
        click.echo(json.dumps(places.as_dict(), indent=2))
        return
    if places.kept_by_source is not None:
        say(f"{name}: {bridge.connector} keeps no position of its own; its source keeps it by what it acknowledged "
            f"({escape(places.kept_by_source)})"
            + ("; a reset seeks the subscription (--to-datetime, --by-duration, --to-latest, --to-earliest, "
               "--to-snapshot, --undo)" if bridge.plugin.seek is not None else ""))
        return
    recorded = ("nothing recorded yet: the next run starts where batch.initial_offsets "
                f"({bridge.batch.initial_offsets}) puts it" if places.recorded_at is None else
                f"recorded {ago(places.recorded_at)} by run {places.run_id}")
    stdout.print(f"{name}: {recorded}; lag {places.lag:,} {places.unit}", soft_wrap=True, highlight=False)
    table = Table(Column("source", overflow="fold"), "partition", "recorded", "next", "start", "end", "lag")
    for place in places.places:
        table.add_row(place.source, str(place.partition), _offset_cell(place.recorded), f"{place.next:,}",
                      _offset_cell(place.start), f"{place.end:,}", f"{place.lag:,}")
    stdout.print(table)


def _offset_cell(offset: int | None) -> str:
    return "-" if offset is None else f"{offset:,}"


def _reset_config(name: str, reset: bool, to: str | None, at: str | None, duration: str | None, shift_by: int | None,
                  offsets: tuple[str, ...], snapshot: str | None, partitions: str | None, clamp: bool, undo: bool,
                  reason: str) -> dict[str, Any] | None:
    """The position reset job's config from the options; None: no reset asked for. Bad options: one line."""
    from datetime import datetime, timedelta, timezone

    from pydantic import TypeAdapter, ValidationError

    ways = {"--to-earliest/--to-latest": to, "--to-datetime": at, "--by-duration": duration,
            "--shift-by": shift_by, "--to-offset": offsets or None, "--to-snapshot": snapshot, "--undo": undo or None}
    given = [option for option, value in ways.items() if value is not None]
    if not given:
        if reset:
            raise BridgeConfigError("--reset: say where to, with one of --to-earliest, --to-latest, --to-datetime, "
                                    "--by-duration, --shift-by, --to-offset, --to-snapshot or --undo")
        return None
    if len(given) > 1:
        raise BridgeConfigError(f"a reset goes one way: {' and '.join(given)} were both given")
    config: dict[str, Any] = {"bridge": name, "clamp": clamp, "reason": reason,
                              "partitions": [p.strip() for p in (partitions or "").split(",") if p.strip()]}
    if to:
        config["to"] = to
    elif at:
        try:
            config["at"] = datetime.fromisoformat(at).isoformat()
        except ValueError:
            raise BridgeConfigError(f"--to-datetime {at!r}: not an ISO 8601 time (2026-11-28T09:30:00Z)") from None
        config["to"] = "datetime"
    elif duration:
        try:
            ago = TypeAdapter(timedelta).validate_python(duration)
        except ValidationError:
            raise BridgeConfigError(f"--by-duration {duration!r}: not an ISO 8601 duration (PT1H, P1D, PT15M)") from None
        config["to"], config["at"] = "datetime", (datetime.now(timezone.utc) - ago).isoformat()
    elif shift_by is not None:
        config["to"], config["shift_by"] = "shift", shift_by
    elif offsets:
        config["to"], config["offsets"] = "offsets", {}
        for pair in offsets:
            where, sep, offset = pair.rpartition("=")
            if not sep or not where or not offset.strip().lstrip("-").isdigit():
                raise BridgeConfigError(f"--to-offset {pair!r}: expected [topic:]partition=offset")
            config["offsets"][where.strip()] = int(offset)
    elif snapshot:
        config["to"], config["snapshot"] = "snapshot", snapshot
    else:
        config["to"] = "undo"
    return config


def _reset(instance, bridge: Bridge, path: Path | None, config: dict[str, Any], execute: bool, as_json: bool) -> None:
    """A dry run plans here; --execute runs the position reset job (the Launchpad's) against the instance."""
    from jobs.position_reset import RESET_METADATA, PositionResetConfig, plan_position_reset, position_reset_job
    from connectors.position_reset import ResetRefused
    from resources import default_resources
    from resources.on_demand import SystemsOnDemand

    job_config = PositionResetConfig(**config, execute=execute)
    try:  # planned here first, so that bad input makes no failed run
        plan = plan_position_reset(instance, bridge, SystemsOnDemand(default_resources()), job_config.target())
    except ResetRefused as exc:
        raise BridgeConfigError(f"{exc}; nothing was changed") from None
    rows, run_id = plan.rows(), None
    if plan.warning:
        say(f"warning: {escape(plan.warning)}")
    if execute:
        if path is not None:
            os.environ["BRIDGES_FILE"] = str(path)  # the job reads the bridge from the bridges file, as the UI's does
        result = position_reset_job.execute_in_process(
            # The command says what happened; the run's events are in the instance for the UI.
            run_config={"ops": {"reset_bridge_position": {"config": job_config.model_dump()}},
                        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
            instance=instance, resources=default_resources(), raise_on_error=False)
        if not result.success:
            failure = result.failure_data_for_node("reset_bridge_position")
            message = (failure.user_failure_data.description if failure and failure.user_failure_data else
                       failure.error.message.strip() if failure and failure.error else "the reset run failed")
            raise BridgeConfigError(f"{message} (run {result.run_id})")
        [observation] = [e.asset_observation_data.asset_observation for e in result.all_events
                         if e.event_type_value == "ASSET_OBSERVATION"]
        recorded = observation.metadata[RESET_METADATA].value
        rows, run_id = recorded["moves"], result.run_id
        if plan.seek is not None:  # the snapshot the run took (named when it ran)
            plan = dataclasses.replace(plan, seek=dataclasses.replace(
                plan.seek, snapshot_first=recorded["before"]["snapshot"]))
    if plan.seek is not None:
        _said_seek(bridge, plan.seek, execute, run_id, as_json, instance)
        return
    if as_json:
        click.echo(json.dumps({"bridge": bridge.name, "executed": execute, "run_id": run_id, "moves": rows}, indent=2))
    else:
        table = Table(Column("source", overflow="fold"), "partition", "now", "new", "replays", "skips")
        for row in rows:
            table.add_row(row["source"], str(row["partition"]), f"{row['now']:,}", f"{row['new']:,}",
                          f"{row['replays']:,}", f"{row['skips']:,}")
        stdout.print(table)
    replays, skips = sum(r["replays"] for r in rows), sum(r["skips"] for r in rows)
    if execute:
        say(f"{bridge.name}: position reset in run {run_id}: the next run replays {replays:,} and skips {skips:,}; "
            f"undo with: bridgectl bridges offsets {bridge.name} --undo --execute")
        return
    say(f"dry run: nothing changed (it would replay {replays:,} and skip {skips:,}); add --execute to do it"
        + _once_stopped(instance, bridge))


def _once_stopped(instance, bridge: Bridge) -> str:
    """For a dry run's last line: the run that holds the bridge now, if one does."""
    from resources.lease import LeaseTiming, current_holder

    holder = current_holder(instance, bridge.name, LeaseTiming())
    if holder is None or holder.stale_because is not None:
        return ""
    return f" once the bridge is stopped: run {holder.run_id} holds it now (bridgectl bridges stop {bridge.name})"


def _said_seek(bridge: Bridge, seek, execute: bool, run_id: str | None, as_json: bool, instance) -> None:
    """A Cloud Pub/Sub source's reset: the seek (there is no per-partition table: a subscription has no offsets)."""
    if as_json:
        click.echo(json.dumps({"bridge": bridge.name, "executed": execute, "run_id": run_id, "moves": [],
                               "seek": dataclasses.asdict(seek)}, indent=2))
    elif execute:
        say(f"{bridge.name}: {escape(seek.describe())} in run {run_id}; undo with: bridgectl bridges offsets "
            f"{bridge.name} --undo --execute")
    else:
        say(f"dry run: nothing changed (it would {escape(seek.describe())}); add --execute to do it"
            + _once_stopped(instance, bridge))
