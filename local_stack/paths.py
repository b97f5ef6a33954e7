"""Where the project keeps its downloads, its local servers' state and its Dagster instance."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STACK_FILES = Path(__file__).resolve().parent / "stack_files"


def cache_dir() -> Path:
    """Downloads and builds (jars, the pstest binary), reused across stacks; ignored by git."""
    return Path(os.environ.get("BRIDGE_CACHE_DIR", PROJECT_ROOT / ".cache"))


def default_stack_home() -> Path:
    """State of the local stack: pids, ports, logs and server data; survives `down`/`up`."""
    return Path(os.environ.get("BRIDGE_STACK_HOME", PROJECT_ROOT / ".local" / "stack"))


def default_dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME", PROJECT_ROOT / "dagster_home"))


def log4j2_config() -> Path:
    from connectors.jvm_logging import LOG4J2_CONFIG

    return LOG4J2_CONFIG
