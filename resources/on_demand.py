"""The shared systems as a connector plugin's `Systems`, outside a run: for the code location's lineage lookups
and `bridgectl bridges offsets`."""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource


class SystemsOnDemand:
    """The shared resources by name (`systems.kafka.admin()`), each initialized on first use: the others may lack
    settings that only their runs need."""

    def __init__(self, resources: dict[str, ConfigurableResource]):
        self._resources, self._initialized = resources, {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._resources:
            raise AttributeError(name)
        if name not in self._initialized:
            self._initialized[name] = self._resources[name].process_config_and_initialize()
        return self._initialized[name]
