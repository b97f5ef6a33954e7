"""The one config loader: `bridges.yaml` (or $BRIDGES_FILE) into validated Bridge objects.

Each entry names a connector and gives its keys inline (`config:`) or as a Kafka Connect
connector `.properties` file (`properties:`). Every problem in the file is reported at once,
each line naming the bridge and the key; secret values never appear in a message.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Literal

import javaproperties
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from connectors.bridge import (
    DEFAULT_GROUP, DEFAULT_HOST, MOST_STREAM_TASKS, BatchSettings, CheckSettings, ContinuousSettings, SensorSettings,
)
from connectors.config.common import IGNORED_FRAMEWORK_KEYS, ExactlyOnceKeys
from connectors.config.providers import ConfigProviderError, check_reference, resolve
from connectors.plugin import Bridge, ConnectorPlugin
from connectors.plugins import installed_plugins, plugin_for

DEFAULT_BRIDGES_FILE = "bridges.yaml"


class BridgeConfigError(ValueError):
    """The bridges file has problems; the message lists each one."""


class _BridgeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    connector: str | None = None
    config: dict[str, Any] | None = None
    properties: str | None = None
    # continuous: always on, one long-lived run moving records as they arrive; batch: the sensor starts one run per
    # micro-batch (scheduled and backfill use). Unset: continuous, or batch for exactly.once.support=required where
    # the connector has exactly once in batch mode only.
    mode: Literal["batch", "continuous"] | None = None
    # The Dagster asset group the bridge and the topics it reads and writes are shown in.
    group: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    batch: BatchSettings = BatchSettings()
    sensor: SensorSettings = SensorSettings()
    continuous: ContinuousSettings = ContinuousSettings()
    checks: CheckSettings = CheckSettings()


def bridges_file_path() -> Path:
    return Path(os.environ.get("BRIDGES_FILE", DEFAULT_BRIDGES_FILE)).resolve()


def load_bridges(path: Path | str | None = None) -> list[Bridge]:
    path = Path(path) if path else bridges_file_path()
    if not path.exists():
        raise BridgeConfigError(f"{path}: bridges file not found (set BRIDGES_FILE to another path)")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise BridgeConfigError(_yaml_problem(path, exc)) from None
    entries = doc.get("bridges") if isinstance(doc, dict) else None
    if entries is None and isinstance(doc, dict) and "bridges" in doc:
        entries = []  # `bridges:` with every entry removed
    if not isinstance(entries, list):
        raise BridgeConfigError(f"{path}: expected a top-level 'bridges:' list")

    bridges, problems, seen = [], [], set()
    for index, raw in enumerate(entries):
        label = _label(raw, path.parent) or f"#{index + 1}"
        try:
            bridge = _load_entry(raw, path.parent)
        except BridgeConfigError as exc:
            problems.extend(f"bridge '{label}': {line}" for line in str(exc).splitlines())
            continue
        if bridge.name in seen:
            problems.append(f"bridge '{bridge.name}': name used twice")
        seen.add(bridge.name)
        bridges.append(bridge)
    problems += _host_problems(bridges)
    if problems:
        raise BridgeConfigError(f"{path}:\n  " + "\n  ".join(problems))
    return bridges


def _label(raw: Any, base_dir: Path) -> str | None:
    """The name an entry's problems are reported under: its own, or its .properties file's `name=`."""
    if not isinstance(raw, dict):
        return None
    if raw.get("name"):
        return str(raw["name"])
    if isinstance(raw.get("properties"), str):
        try:
            return _read_properties(base_dir / raw["properties"]).get("name")
        except BridgeConfigError:
            return None
    return None


def _host_problems(bridges: list[Bridge]) -> list[str]:
    """A host moves continuous bridges only, and its run's step (`host_<name>`) must not take a bridge's name."""
    names = {b.name for b in bridges}
    problems = []
    for bridge in bridges:
        host = bridge.continuous.host
        if host is None:
            continue
        if bridge.mode != "continuous":
            problems.append(f"bridge '{bridge.name}': continuous.host {host!r} needs mode: continuous "
                            "(a batch bridge's runs are started by its own sensor)")
        if f"host_{host}" in names:
            # The default host's name is one the user may never have written.
            chosen = " (the host of always-on bridges that name none)" if host == DEFAULT_HOST else ""
            problems.append(f"bridge '{bridge.name}': continuous.host {host!r}{chosen} would name its run's step "
                            f"host_{host}, which is a bridge's name; rename that bridge or choose another host name")
    return problems


def _load_entry(raw: Any, base_dir: Path) -> Bridge:
    if not isinstance(raw, dict):
        raise BridgeConfigError("each entry must be a mapping with name, connector and config or properties")
    try:
        entry = _BridgeEntry.model_validate(raw)
    except ValidationError as exc:
        raise BridgeConfigError("\n".join(_describe(err, _entry_keys()) for err in exc.errors())) from None
    if (entry.config is None) == (entry.properties is None):
        raise BridgeConfigError("give exactly one of 'config:' and 'properties:'")

    keys: dict[str, Any]
    if entry.properties is not None:
        keys = _read_properties(base_dir / entry.properties)
    else:
        keys = {str(k): v for k, v in entry.config.items()}

    name = entry.name or keys.get("name")
    if not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)):
        raise BridgeConfigError(
            f"name {name!r} must be letters, digits and underscores (it becomes the asset key)"
        )
    connector = entry.connector or keys.get("connector.class")
    if not connector:
        raise BridgeConfigError("key 'connector': missing (or 'connector.class' in the properties file)")
    plugin = plugin_for(str(connector))
    if plugin is None:
        raise BridgeConfigError(f"key 'connector': unknown connector {connector!r}; installed: "
                                f"{', '.join(sorted(installed_plugins()))}")
    if entry.connector and keys.get("connector.class") and plugin_for(keys["connector.class"]) is not plugin:
        raise BridgeConfigError(
            f"key 'connector': {entry.connector} disagrees with connector.class={keys['connector.class']}"
        )

    tasks_max = keys.get("tasks.max")
    secret = plugin.config_model.secret_keys()
    try:
        for key in secret & set(keys):
            check_reference(key, keys[key])  # resolved where used (Bridge.with_secrets)
        keys = {k: v if k in secret else resolve(k, v) for k, v in keys.items() if k not in IGNORED_FRAMEWORK_KEYS}
    except ConfigProviderError as exc:
        raise BridgeConfigError(str(exc)) from None
    try:
        config = plugin.config_model.model_validate(keys)
    except ValidationError as exc:
        known, secret = set(plugin.config_model.known_keys()), plugin.config_model.secret_keys()
        raise BridgeConfigError("\n".join(_describe(err, known, secret) for err in exc.errors())) from None
    if entry.batch.min_partitions is not None and (why := plugin.partition_order(config)) is not None:
        raise BridgeConfigError(f"batch.min_partitions: {plugin.name} cannot split a partition's records over "
                                f"tasks here: {why}")
    exactly_once = isinstance(config, ExactlyOnceKeys) and config.exactly_once
    mode = entry.mode or _default_mode(plugin, exactly_once)
    if exactly_once and mode not in plugin.exactly_once_modes:
        built = " and ".join(plugin.exactly_once_modes) or "no mode"
        raise BridgeConfigError(f"exactly.once.support=required: {plugin.name} has it in {built} so far, not in "
                                f"mode {mode}")
    continuous = _with_tasks_max(_with_default_host(entry.continuous, mode), tasks_max)
    return Bridge(str(name), plugin, config, entry.batch, entry.sensor, mode, continuous,
                  entry.group or DEFAULT_GROUP, entry.checks)


def _default_mode(plugin: ConnectorPlugin, exactly_once: bool) -> str:
    """Always on unless the entry says otherwise: by `python -m bench.fleet` ten always-on bridges cost a third of
    the CPU of ten in micro-batch mode and their records arrive in a fraction of a second, not tens of seconds. A
    bridge asking exactly.once.support=required of a connector that has it in micro-batch mode only gets that."""
    if exactly_once and "continuous" not in plugin.exactly_once_modes and "batch" in plugin.exactly_once_modes:
        return "batch"
    return "continuous"


def _with_default_host(continuous: ContinuousSettings, mode: str) -> ContinuousSettings:
    """An always-on bridge that names no host joins the default one (`DEFAULT_HOST`): thirty bridges in one run cost
    one run process and one Python worker, not thirty (by `python -m bench.fleet`, 145 % of a core and 15.7 GB as
    runs of their own against 83 % and 1.9 GB in one host). `host: null` asks for a run of its own."""
    if mode != "continuous" or "host" in continuous.model_fields_set:
        return continuous
    return continuous.model_copy(update={"host": DEFAULT_HOST})


def _with_tasks_max(continuous: ContinuousSettings, tasks_max: Any) -> ContinuousSettings:
    """Kafka Connect's `tasks.max` as the always-on stream's task count (`continuous.stream_tasks`) when the entry
    does not set that, so a connector's properties file runs at the parallelism it ran at in Java. Only in a run of
    its own: in a host the host's Python workers are shared by all its bridges (sized by the members'
    `stream_tasks`), and thirty properties files' tasks.max would multiply them. Above 64 (the most stream tasks) it
    is taken as 64."""
    if tasks_max is None:
        return continuous
    try:
        tasks = int(str(tasks_max).strip())
    except ValueError:
        tasks = 0
    if tasks < 1:
        raise BridgeConfigError(f"key 'tasks.max': must be a whole number of at least 1 (got {tasks_max!r})")
    if continuous.host is not None or "stream_tasks" in continuous.model_fields_set:
        return continuous
    return continuous.model_copy(update={"stream_tasks": min(tasks, MOST_STREAM_TASKS)})


def _entry_keys() -> set[str]:
    """Every key an entry may have, dotted as pydantic reports them (`batch.max_records`), for "did you mean"."""
    keys = set(_BridgeEntry.model_fields)
    for section in ("batch", "sensor", "continuous", "checks"):
        keys |= {f"{section}.{field}" for field in _BridgeEntry.model_fields[section].annotation.model_fields}
    return keys


def _yaml_problem(path: Path, exc: yaml.YAMLError) -> str:
    """One line, `file:line:column: what`, instead of the parser's multi-line report."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    what = " ".join(part for part in (getattr(exc, "context", None), getattr(exc, "problem", None)) if part)
    return f"{where}: not valid YAML: {what or type(exc).__name__}"


def _read_properties(path: Path) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return javaproperties.load(fh)
    except OSError as exc:
        raise BridgeConfigError(f"key 'properties': cannot read {path}: {exc.strerror}") from None


def _describe(err: dict, known: set[str], secret: frozenset[str] = frozenset()) -> str:
    key = ".".join(str(part) for part in err["loc"]) if err["loc"] else None
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"key '{key}': unknown key{hint}"
    if err["type"] == "missing":
        return f"key '{key}': required, not set"
    message = err["msg"].removeprefix("Value error, ")
    if key is None:
        return message
    shown = "" if key in secret or isinstance(err.get("input"), (dict, list)) else f" (got {err.get('input')!r})"
    return f"key '{key}': {message}{shown}"
