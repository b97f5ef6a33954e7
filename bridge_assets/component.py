"""The bridges file as a Dagster Component (bridge_assets/defs/bridges/defs.yaml names it): the code location,
`dg list defs` and `dg check defs` all load the bridges through it."""

from __future__ import annotations

import dagster as dg

from bridge_assets.definitions import build_definitions
from connectors.bridges_file import bridges_file_path


class BridgesFile(dg.Component, dg.Model, dg.Resolvable):
    """Every bridge of the bridges file (the BRIDGES_FILE environment variable, else bridges.yaml in the working
    directory) as Dagster definitions: per bridge an asset with its checks, a job and a sensor; per host one step
    moving its bridges, a job and a keeper; the topics and subscriptions they read and write, as lineage."""

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_definitions(str(bridges_file_path()))
