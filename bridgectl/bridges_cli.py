"""`bridgectl bridges ...`: add, remove, list, start, stop, status and stats of bridges (`offsets` is in
bridge_offsets_cli.py), acting on the bridges file and on a running deployment (Dagster's GraphQL API for the sensors,
runs and code location; its instance for the stats)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import click
import javaproperties
from rich.console import Console
from rich.table import Column, Table

from bridgectl.bridges_edit import add_entry, remove_entry
from bridgectl.deployment import Deployment
from local_stack.stack import default_dagster_url
from local_stack.paths import default_dagster_home
from bridgectl.relay import say
from connectors.bridges_file import BridgeConfigError, bridges_file_path, load_bridges
from connectors.plugin import Bridge

stdout = Console()  # tables are the output; our remarks go to stderr (`say`)
_URL = click.option("--url", default=lambda: default_dagster_url(),
                    show_default="$DAGSTER_URL, else the UI `bridgectl dev` serves, else http://127.0.0.1:3000",
                    help="the running Dagster deployment")
FILE_OPTION = click.option("--file", "path", type=click.Path(path_type=Path), default=None,
                     help="the bridges file (default: $BRIDGES_FILE or bridges.yaml)")
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")


def bridge_named(path: Path | None, name: str) -> Bridge:
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
@FILE_OPTION
@JSON_OPTION
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
    stdout.print(table)


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
@FILE_OPTION
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
    bridge = bridge_named(path, name)
    say(f"added {name} to {path}: {bridge.connector}, {bridge.plugin.route(bridge)}")
    if (deployment := _deployment(url)) is not None:
        deployment.reload()
        say(f"Dagster at {url} reloaded; sensor {_sensor_name(bridge)} "
            f"{deployment.sensor_status(_sensor_name(bridge)).lower()}")


@bridges.command()
@click.argument("name")
@FILE_OPTION
@_URL
def remove(name: str, path: Path | None, url: str) -> None:
    """Remove a bridge: its runs are ended first, then the file changes and the deployment reloads."""
    path = path or bridges_file_path()
    bridge = bridge_named(path, name)
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
@FILE_OPTION
@_URL
def start(name: str, path: Path | None, url: str) -> None:
    """Turn the bridge's sensor on; a hosted bridge held stopped on a record is tried again."""
    from dagster import DagsterInstance

    from sensors.switches import release_stopped

    bridge = bridge_named(path, name)
    status = Deployment(url).set_sensor(_sensor_name(bridge), running=True)
    say(f"{name}: sensor {_sensor_name(bridge)} {status.lower()}")
    os.environ.setdefault("DAGSTER_HOME", str(default_dagster_home()))
    with DagsterInstance.get() as instance:
        if release_stopped(instance, name):
            say(f"{name}: no longer held stopped on the record it failed on; its host's run tries it again")


@bridges.command()
@click.argument("name")
@FILE_OPTION
@_URL
def stop(name: str, path: Path | None, url: str) -> None:
    """Turn the bridge's sensor off; a continuous run ends after its batch, recording its position (a batch
    run in flight finishes its batch); a hosted bridge ends in its host's run, the others going on."""
    bridge = bridge_named(path, name)
    deployment = Deployment(url)
    status = deployment.set_sensor(_sensor_name(bridge), running=False)
    say(f"{name}: sensor {_sensor_name(bridge)} {status.lower()}")
    if bridge.host is not None:
        say(f"{name}: host {bridge.host}'s run ends it after recording its commit (its other bridges "
            "go on)")
    elif bridge.mode == "continuous":
        for run_id in deployment.end_runs(name):
            say(f"{name}: ended continuous run {run_id}")


def _error_cell(error: dict | None, width: int = 60) -> str:
    if not error:
        return "-"
    text = f"{ago(error['at'])}: {error['message']}"
    return text if len(text) <= width else text[:width - 1] + "…"  # the whole of it: --json


def _run_cell(run: dict | None) -> str:
    if not run:
        return "-"
    at = run["ended"] or run["started"]
    return run["status"].lower() + (f" {ago(at)}" if at else "")


def ago(at: float | None) -> str:
    """How long ago an epoch time was, as a table cell."""
    if at is None:
        return "-"
    seconds = max(0, time.time() - at)
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago" if seconds < 7200 else \
        f"{seconds / 3600:.0f}h ago"


def dagster_instance():
    """The deployment's Dagster instance ($DAGSTER_HOME, else the local one); a home that is not there: one line."""
    from dagster import DagsterInstance, DagsterInvariantViolationError

    os.environ.setdefault("DAGSTER_HOME", str(default_dagster_home()))
    try:
        return DagsterInstance.get()
    except DagsterInvariantViolationError as exc:
        raise BridgeConfigError(str(exc).split(". ")[0]) from None


def _stats(path: Path | None, name: str | None, window_minutes: float) -> list[dict[str, Any]]:
    from bridgectl.bridge_stats import bridge_stats

    chosen = [bridge_named(path, name)] if name else load_bridges(path)
    with dagster_instance() as instance:
        return [bridge_stats(instance, bridge, window_minutes).as_dict() for bridge in chosen]


@bridges.command()
@click.argument("name", required=False)
@FILE_OPTION
@_URL
@JSON_OPTION
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
    stdout.print(table)
    if not reachable:
        say(f"(no Dagster deployment answers at {url}: sensor states unknown)")


@bridges.command()
@click.argument("name", required=False)
@click.option("--since", "window_minutes", type=float, default=60, show_default=True, help="the window, in minutes")
@FILE_OPTION
@JSON_OPTION
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
    stdout.print(table)
