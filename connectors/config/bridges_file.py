"""The one config loader: `bridges.yaml` (or $BRIDGES_FILE) into validated Bridge objects.

Each entry names a connector and gives its keys inline (`config:`) or as a Kafka Connect
connector `.properties` file (`properties:`). Every problem in the file is reported at once,
each line naming the bridge and the key; secret values never appear in a message.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import javaproperties
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from connectors.config.common import IGNORED_FRAMEWORK_KEYS, ConnectorConfig
from connectors.registry import CONNECTOR_KINDS, ConnectorKind, kind_for

DEFAULT_BRIDGES_FILE = "bridges.yaml"
DEFAULT_GROUP = "bridges"
SECRET_KEYS = frozenset({"gcp.credentials.json"})
_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")  # Kafka Connect's EnvVarConfigProvider syntax


class BridgeConfigError(ValueError):
    """The bridges file has problems; the message lists each one."""


class BatchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # Upper bound on records one run moves, over all partitions; the rest waits for the next run.
    max_records: int = Field(100_000, ge=1)
    # Where a bridge starts when no run has recorded offsets yet: the Kafka Connect consumer
    # group's committed offsets (group `connect-<name>`) if it has any, else earliest.
    initial_offsets: Literal["committed", "earliest", "latest"] = "committed"
    # Spark tasks that pull in parallel (source connectors; sinks use one task per Kafka partition).
    parallelism: int = Field(2, ge=1, le=64)
    # Kafka, Pub/Sub, Lite or S3 silent this long fails the run with one line naming it.
    outage_timeout_seconds: int = Field(30, ge=5, le=3600)
    # Cloud Pub/Sub source: a micro-batch stops pulling after this long, even while messages keep coming
    # (default: only at max_records or an empty pull). Continuous mode sets it to the commit interval.
    max_seconds: float | None = Field(None, gt=0, le=86_400)


class SensorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    interval_seconds: int = Field(30, ge=1, le=86_400)


class ContinuousSettings(BaseModel):
    """How a bridge in `mode: continuous` loops: one long-lived run moving micro-batches back to back."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    # With nothing to move, look again after this long (a batch that moved records is followed at once).
    trigger_interval_ms: int = Field(200, ge=10, le=60_000)
    # Record the position (a materialization) at most this often, like Kafka Connect's offset flush.
    commit_interval_ms: int = Field(5_000, ge=100, le=3_600_000)
    # The run ends cleanly after this long and the sensor starts the next one (fresh logs, fresh clients).
    max_run_minutes: float = Field(60, gt=0, le=7 * 24 * 60)


class CheckSettings(BaseModel):
    """Bounds of the bridge's asset checks (see bridge_assets/checks.py)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    # Records (Kafka sinks) or messages (Lite source) not moved yet that still count as healthy;
    # default: one batch's worth (batch.max_records).
    max_lag: int | None = Field(None, ge=0)
    # Records waiting and no successful batch for this long: the bridge is stale.
    max_age_minutes: float = Field(10, gt=0, le=7 * 24 * 60)


class _BridgeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    connector: str | None = None
    config: dict[str, Any] | None = None
    properties: str | None = None
    # batch: the sensor starts one run per micro-batch; continuous: one run loops micro-batches.
    mode: Literal["batch", "continuous"] = "batch"
    # The Dagster asset group the bridge and the topics it reads and writes are shown in.
    group: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    batch: BatchSettings = BatchSettings()
    sensor: SensorSettings = SensorSettings()
    continuous: ContinuousSettings = ContinuousSettings()
    checks: CheckSettings = CheckSettings()


@dataclass(frozen=True)
class Bridge:
    name: str
    kind: ConnectorKind
    config: ConnectorConfig
    batch: BatchSettings
    sensor: SensorSettings
    mode: Literal["batch", "continuous"] = "batch"
    continuous: ContinuousSettings = ContinuousSettings()
    group: str = DEFAULT_GROUP
    checks: CheckSettings = CheckSettings()

    @property
    def max_lag(self) -> int:
        return self.batch.max_records if self.checks.max_lag is None else self.checks.max_lag

    @property
    def connector(self) -> str:
        return self.kind.name

    @property
    def consumer_group(self) -> str:
        """The group Kafka Connect would use for this sink, so committed offsets carry over."""
        return f"connect-{self.name}"


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
    if not isinstance(entries, list):
        raise BridgeConfigError(f"{path}: expected a top-level 'bridges:' list")

    bridges, problems, seen = [], [], set()
    for index, raw in enumerate(entries):
        label = raw.get("name") if isinstance(raw, dict) and raw.get("name") else f"#{index + 1}"
        try:
            bridge = _load_entry(raw, path.parent)
        except BridgeConfigError as exc:
            problems.extend(f"bridge '{label}': {line}" for line in str(exc).splitlines())
            continue
        if bridge.name in seen:
            problems.append(f"bridge '{bridge.name}': name used twice")
        seen.add(bridge.name)
        bridges.append(bridge)
    if problems:
        raise BridgeConfigError(f"{path}:\n  " + "\n  ".join(problems))
    return bridges


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
    kind = kind_for(str(connector))
    if kind is None:
        raise BridgeConfigError(
            f"key 'connector': unknown connector {connector!r}; known: {', '.join(CONNECTOR_KINDS)}"
        )
    if entry.connector and keys.get("connector.class") and kind_for(keys["connector.class"]) != kind:
        raise BridgeConfigError(
            f"key 'connector': {entry.connector} disagrees with connector.class={keys['connector.class']}"
        )
    if kind.config_model is None:
        raise BridgeConfigError(f"key 'connector': {kind.name} is not implemented yet")

    keys = {k: _resolve_env(k, v) for k, v in keys.items() if k not in IGNORED_FRAMEWORK_KEYS}
    try:
        config = kind.config_model.model_validate(keys)
    except ValidationError as exc:
        known = set(kind.config_model.known_keys())
        raise BridgeConfigError("\n".join(_describe(err, known) for err in exc.errors())) from None
    return Bridge(str(name), kind, config, entry.batch, entry.sensor, entry.mode, entry.continuous,
                  entry.group or DEFAULT_GROUP, entry.checks)


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


def _resolve_env(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        var = match.group(1)
        if var not in os.environ:
            raise BridgeConfigError(f"key '{key}': environment variable {var} is not set")
        return os.environ[var]

    return _ENV_REFERENCE.sub(substitute, value)


def _describe(err: dict, known: set[str]) -> str:
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
    shown = "" if key in SECRET_KEYS or isinstance(err.get("input"), (dict, list)) else f" (got {err.get('input')!r})"
    return f"key '{key}': {message}{shown}"
