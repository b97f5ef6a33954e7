"""Dagster code location: `dagster dev -w workspace.yaml` or `dagster asset materialize -m bridge_assets`."""

from bridge_assets.definitions import build_definitions

defs = build_definitions()
