"""Dagster code location: `dagster dev -w workspace.yaml`, `dg launch --assets <bridge>` or `dagster asset materialize -m
bridge_assets`. Loaded lazily: importing the package reads no bridges file (its `${env:...}` references may name a
stack that is not up where the code is only imported)."""

import atexit
import functools
import gc
import os
from pathlib import Path

import dagster as dg  # not `from dagster import definitions`: the submodule bridge_assets.definitions shadows it

from connectors.bridges_file import bridges_file_path

# Every Dagster process of this project (a run, `dagster asset materialize`, the code server) loads this package.
# Its heap is large and long-lived (Dagster, pyspark, pandas, protobuf descriptors), and the interpreter's last
# garbage collections at exit walk all of it: about a second of a core per process, after the work has ended
# (profiled: gc_collect_main under Py_FinalizeEx). Frozen objects are skipped by those collections; what they would
# free the OS frees as the process ends. Registered here, it runs after the hooks registered later (pyspark's,
# the Spark client's close) and before logging's, which flushes every handler.
atexit.register(gc.freeze)


@functools.lru_cache(maxsize=1)
def _loaded(bridges_file: str, changed_ns: int) -> dg.Definitions:
    # The defs folder (bridge_assets/defs/, dg.toml's defs_module) holds one component: the bridges file.
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)


@dg.definitions
def code_location() -> dg.Definitions:
    # Dagster calls this at every load of the code location in a process (seven times in one `dagster asset
    # materialize`); each build asks Pub/Sub and Lite for lineage, and Dagster describes its component library
    # (about 0.1 s): loaded once per version of the bridges file.
    path = bridges_file_path()
    # A missing file raises its one line, and a raise is never cached.
    return _loaded(str(path), os.stat(path).st_mtime_ns if path.exists() else 0)
