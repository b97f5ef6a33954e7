"""Dagster code location: `dagster dev -w workspace.yaml`, `dg launch --assets <bridge>` or `dagster asset materialize -m
bridge_assets`. Loaded lazily: importing the package reads no bridges file (its `${env:...}` references may name a
stack that is not up where the code is only imported)."""

import dagster as dg  # not `from dagster import definitions`: the submodule bridge_assets.definitions shadows it

from bridge_assets.definitions import build_definitions


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
