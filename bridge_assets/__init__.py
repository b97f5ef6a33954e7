"""Dagster code location: `dagster dev -w workspace.yaml`, `dg launch --assets <bridge>` or `dagster asset materialize -m
bridge_assets`. Loaded lazily: importing the package reads no bridges file (its `${env:...}` references may name a
stack that is not up where the code is only imported)."""

import functools
import os

import dagster as dg  # not `from dagster import definitions`: the submodule bridge_assets.definitions shadows it

from bridge_assets.definitions import build_definitions
from connectors.bridges_file import bridges_file_path


@functools.lru_cache(maxsize=1)
def _built(path: str, changed_ns: int) -> dg.Definitions:
    return build_definitions(path)


@dg.definitions
def defs() -> dg.Definitions:
    # Dagster calls this at every load of the code location in a process (seven times in one `dagster asset
    # materialize`), and each build asks Pub/Sub and Lite for lineage: built once per version of the file.
    path = str(bridges_file_path())
    if not os.path.exists(path):
        return build_definitions(path)  # says what is missing, in its one line
    return _built(path, os.stat(path).st_mtime_ns)
