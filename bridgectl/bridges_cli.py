"""`bridgectl bridges ...`: add, remove, list, start, stop, status, stats and offsets of bridges, acting on the
bridges file and on a running deployment (Dagster's GraphQL API for the sensors, runs and code location; its
instance for the stats and the recorded positions; the shared systems' admin APIs for where sources end)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import click
import javaproperties
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from bridgectl.bridges_edit import add_entry, remove_entry
from bridgectl.deployment import Deployment
from bridgectl.local_stack import default_dagster_url
from bridgectl.paths import default_dagster_home
from bridgectl.relay import say
from connectors.bridges_file import BridgeConfigError, bridges_file_path, load_bridges
from connectors.plugin import Bridge

_stdout = Console()  # tables are the output; our remarks go to stderr (`say`)
_URL = click.option("--url", default=lambda: default_dagster_url(),
                    show_default="$DAGSTER_URL, else the UI `bridgectl dev` serves, else http://127.0.0.1:3000",
                    help="the running Dagster deployment")
_FILE = click.option("--file", "path", type=click.Path(path_type=Path), default=None,
                     help="the bridges file (default: $BRIDGES_FILE or bridges.yaml)")
_JSON = click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")


def _bridge(path: Path | None, name: str) -> Bridge:
    bridges = {b.name: b for b in load_bridges(path)}
    if name not in bridges:
        raise BridgeConfigError(f"no bridge named {name!r} in {path or bridges_file_path()}; "
                                f"there are: {', '.join(sorted(bridges)) or 'none'}")
    return bridges[name]


def _sensor_name(bridge: Bridge) -> str:
    from jobs import job_name
    from sensors import build_bridge_sensor

    return build_bridge_sensor(bridge, job_name(bridge)).name


def _deployment(url: str) -> Deployment | None:
    deployment = Deployment(url)
    if deployment.reachable():
        return deployment
    say(f"no Dagster deployment answers at {url}: the bridges file is the only thing changed "
        "(--url or $DAGSTER_URL to name one)")
    return None


def asset_name(connector_name: str) -> str:
    """A Kafka Connect connector's name (`payments-to-pubsub`) as a bridge name, which is an asset key."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", connector_name)
    return name if re.match(r"[A-Za-z_]", name) else f"_{name}"


def parse_sets(pairs: tuple[str, ...]) -> dict[str, str]:
    keys = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BridgeConfigError(f"--set {pair!r}: expected key=value")
        keys[key.strip()] = value
    return keys


@click.group()
def bridges() -> None:
    """Add, remove, list, start, stop, status, stats and offsets of bridges."""


@bridges.command("list")
@_FILE
@_JSON
def list_bridges(path: Path | None, as_json: bool) -> None:
    """Every bridge in the bridges file: connector, mode, group, route."""
    rows = [{"name": b.name, "connector": b.connector, "mode": b.mode, "group": b.group,
             "route": b.plugin.route(b), "sensor_default": "on" if b.sensor.enabled else "off"}
            for b in load_bridges(path)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(Column("name", no_wrap=True), "connector", "mode", "group", "sensor default")  # routes: --json
    for row in rows:
        table.add_row(row["name"], row["connector"], row["mode"], row["group"], row["sensor_default"])
    _stdout.print(table)


@bridges.command()
@click.argument("name", required=False)
@click.option("--connector", help="a connector name or class (or connector.class in --properties)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="a connector key (repeat); secrets only as ${env:VAR} or ${file:path:key}")
@click.option("--properties", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="an unchanged Kafka Connect .properties file instead of --set")
@click.option("--mode", type=click.Choice(["batch", "continuous"]),
              help="continuous: always on, in one long-lived run; batch: a run per micro-batch (default: "
                   "continuous, or batch for exactly.once.support=required where only batch has it)")
@click.option("--host", help="move it in this host's one long-lived run, with the other bridges naming it "
                             "(continuous mode)")
@click.option("--group", help="the asset group (default: bridges)")
@click.option("--interval", type=int, help="sensor interval in seconds (default 30)")
@_FILE
@_URL
def add(name: str | None, connector: str | None, sets: tuple[str, ...], properties: Path | None, mode: str | None,
        host: str | None, group: str | None, interval: int | None, path: Path | None, url: str) -> None:
    """Add a bridge NAME (with --properties, NAME defaults to the file's name=): validated with the whole file
    before anything is written; a running deployment loads it and its sensor starts by itself."""
    path = path or bridges_file_path()
    if properties and sets:
        raise BridgeConfigError("give --properties or --set, not both")
    if not properties and not sets:
        raise BridgeConfigError("give the connector's keys with --set key=value or --properties FILE")
    file_keys: dict[str, str] = {}
    if properties:
        with open(properties, encoding="utf-8") as fh:
            file_keys = javaproperties.load(fh)  # a file that does not parse is told before anything else
    if not name:
        if not file_keys.get("name"):
            raise BridgeConfigError("give the bridge's NAME (or a --properties file with name=)")
        name = asset_name(file_keys["name"])
        if name != file_keys["name"]:
            say(f"named {name}, from name={file_keys['name']} (an asset key takes letters, digits and underscores)")
    entry: dict[str, Any] = {"name": name}
    if connector:
        entry["connector"] = connector
    elif not properties:
        raise BridgeConfigError("--connector is required with --set")
    if mode:
        entry["mode"] = mode
    if host:
        entry["continuous"] = {"host": host}  # with --mode batch the load says why that cannot be
    if group:
        entry["group"] = group
    if properties:
        entry["properties"] = os.path.relpath(properties.resolve(), path.resolve().parent)
    else:
        entry["config"] = parse_sets(sets)
    if interval:
        entry["sensor"] = {"interval_seconds": interval}
    add_entry(path, entry)
    bridge = _bridge(path, name)
    say(f"added {name} to {path}: {bridge.connector}, {bridge.plugin.route(bridge)}")
    if (deployment := _deployment(url)) is not None:
        deployment.reload()
        say(f"Dagster at {url} reloaded; sensor {_sensor_name(bridge)} "
            f"{deployment.sensor_status(_sensor_name(bridge)).lower()}")


@bridges.command()
@click.argument("name")
@_FILE
@_URL
def remove(name: str, path: Path | None, url: str) -> None:
    """Remove a bridge: its runs are ended first, then the file changes and the deployment reloads."""
    path = path or bridges_file_path()
    bridge = _bridge(path, name)
    deployment = _deployment(url)
    if deployment is not None:
        deployment.set_sensor(_sensor_name(bridge), running=False)
        for run_id in deployment.end_runs(name):
            say(f"ended run {run_id}")
    remove_entry(path, name)
    say(f"removed {name} from {path} (its recorded position stays in Dagster: added again, it resumes)")
    if deployment is not None:
        deployment.reload()
        say(f"Dagster at {url} reloaded")


@bridges.command()
@click.argument("name")
@_FILE
@_URL
def start(name: str, path: Path | None, url: str) -> None:
    """Turn the bridge's sensor on; a hosted bridge held stopped on a record is tried again."""
    from dagster import DagsterInstance

    from sensors.switches import release_stopped

    bridge = _bridge(path, name)
    status = Deployment(url).set_sensor(_sensor_name(bridge), running=True)
    say(f"{name}: sensor {_sensor_name(bridge)} {status.lower()}")
    os.environ.setdefault("DAGSTER_HOME", str(default_dagster_home()))
    with DagsterInstance.get() as instance:
        if release_stopped(instance, name):
            say(f"{name}: no longer held stopped on the record it failed on; its host's run tries it again")


@bridges.command()
@click.argument("name")
@_FILE
@_URL
def stop(name: str, path: Path | None, url: str) -> None:
    """Turn the bridge's sensor off; a continuous run ends after its batch, recording its position (a batch
    run in flight finishes its batch); a hosted bridge ends in its host's run, the others going on."""
    bridge = _bridge(path, name)
    deployment = Deployment(url)
    status = deployment.set_sensor(_sensor_name(bridge), running=False)
    say(f"{name}: sensor {_sensor_name(bridge)} {status.lower()}")
    if bridge.mode == "continuous" and bridge.continuous.host is not None:
        say(f"{name}: host {bridge.continuous.host}'s run ends it after recording its commit (its other bridges "
            "go on)")
    elif bridge.mode == "continuous":
        for run_id in deployment.end_runs(name):
            say(f"{name}: ended continuous run {run_id}")


def _error_cell(error: dict | None, width: int = 60) -> str:
    if not error:
        return "-"
    text = f"{_ago(error['at'])}: {error['message']}"
    return text if len(text) <= width else text[:width - 1] + "…"  # the whole of it: --json


def _run_cell(run: dict | None) -> str:
    if not run:
        return "-"
    at = run["ended"] or run["started"]
    return run["status"].lower() + (f" {_ago(at)}" if at else "")


def _ago(at: float | None) -> str:
    if at is None:
        return "-"
    seconds = max(0, time.time() - at)
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago" if seconds < 7200 else \
        f"{seconds / 3600:.0f}h ago"


def _instance():
    """The deployment's Dagster instance ($DAGSTER_HOME, else the local one); a home that is not there: one line."""
    from dagster import DagsterInstance, DagsterInvariantViolationError

    os.environ.setdefault("DAGSTER_HOME", str(default_dagster_home()))
    try:
        return DagsterInstance.get()
    except DagsterInvariantViolationError as exc:
        raise BridgeConfigError(str(exc).split(". ")[0]) from None


def _stats(path: Path | None, name: str | None, window_minutes: float) -> list[dict[str, Any]]:
    from bridgectl.bridge_stats import bridge_stats

    chosen = [_bridge(path, name)] if name else load_bridges(path)
    with _instance() as instance:
        return [bridge_stats(instance, bridge, window_minutes).as_dict() for bridge in chosen]


@bridges.command()
@click.argument("name", required=False)
@_FILE
@_URL
@_JSON
def status(name: str | None, path: Path | None, url: str, as_json: bool) -> None:
    """Sensor on or off, last run and its outcome, lag, latest error."""
    rows = _stats(path, name, window_minutes=60)
    deployment = Deployment(url)
    reachable = deployment.reachable()
    by_name = {b.name: b for b in load_bridges(path)}
    for row in rows:
        row["sensor"] = deployment.sensor_status(_sensor_name(by_name[row["bridge"]])) if reachable else None
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(Column("bridge", no_wrap=True), "sensor", "last run", "lag", "latest error")
    for row in rows:
        table.add_row(row["bridge"], (row["sensor"] or "?").lower(), _run_cell(row["last_run"]),
                      "-" if row["lag"] is None else f"{row['lag']} {row['unit']}", _error_cell(row["last_error"]))
    _stdout.print(table)
    if not reachable:
        say(f"(no Dagster deployment answers at {url}: sensor states unknown)")


@bridges.command()
@click.argument("name", required=False)
@click.option("--since", "window_minutes", type=float, default=60, show_default=True, help="the window, in minutes")
@_FILE
@_JSON
def stats(name: str | None, window_minutes: float, path: Path | None, as_json: bool) -> None:
    """Records read and delivered, rejected, throughput, lag, runs failed and the latest error."""
    rows = _stats(path, name, window_minutes)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(Column("bridge", no_wrap=True), "batches", "read", "delivered", "rejected", "per second", "lag",
                  "failed runs", "latest error", title=f"last {window_minutes:g} minutes")
    for row in rows:
        table.add_row(row["bridge"], str(row["batches"]), f"{row['read']:,}", f"{row['delivered']:,}",
                      f"{row['rejected']:,}", "-" if row["per_second"] is None else f"{row['per_second']:,.1f}",
                      "-" if row["lag"] is None else f"{row['lag']:,} {row['unit']}", str(row["failed_runs"]),
                      _error_cell(row["last_error"], 40))
    _stdout.print(table)


@bridges.command()
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
@_FILE
@_JSON
def offsets(name: str, reset: bool, to: str | None, at: str | None, duration: str | None, shift_by: int | None,
            offsets: tuple[str, ...], snapshot: str | None, partitions: str | None, clamp: bool, undo: bool,
            execute: bool, reason: str, path: Path | None, as_json: bool) -> None:
    """The bridge's recorded position per partition beside where its source starts and ends, and the lag; with
    --reset, a move of it (a dry run unless --execute)."""
    from bridgectl.bridge_positions import bridge_places
    from connectors.kafka.connection import client_logger
    from resources import default_resources
    from resources.on_demand import SystemsOnDemand

    bridge = _bridge(path, name)
    reset_config = _reset_config(name, reset, to, at, duration, shift_by, offsets, snapshot, partitions, clamp, undo,
                                 reason)
    client_logger().setLevel(logging.CRITICAL)  # a client that cannot connect fails the command in one line
    with _instance() as instance:
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
                f"recorded {_ago(places.recorded_at)} by run {places.run_id}")
    _stdout.print(f"{name}: {recorded}; lag {places.lag:,} {places.unit}", soft_wrap=True, highlight=False)
    table = Table(Column("source", no_wrap=True), "partition", "recorded", "next", "start", "end", "lag")
    for place in places.places:
        table.add_row(place.source, str(place.partition), _offset_cell(place.recorded), f"{place.next:,}",
                      _offset_cell(place.start), f"{place.end:,}", f"{place.lag:,}")
    _stdout.print(table)


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
        table = Table(Column("source", no_wrap=True), "partition", "now", "new", "replays", "skips")
        for row in rows:
            table.add_row(row["source"], str(row["partition"]), f"{row['now']:,}", f"{row['new']:,}",
                          f"{row['replays']:,}", f"{row['skips']:,}")
        _stdout.print(table)
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
