"""The connectors installed in this Python environment: every entry point in the group
`kafka_pubsub_bridge.connectors` names a `ConnectorPlugin` (this package registers its five in pyproject.toml;
a third party's `pip install` adds more, with no change here)."""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from connectors.plugin import ENTRY_POINT_GROUP, ConnectorPlugin


class PluginError(RuntimeError):
    """An installed connector plugin cannot be used; the message names its entry point and package."""


@functools.cache
def installed_plugins() -> dict[str, ConnectorPlugin]:
    """By connector name, loaded once per process."""
    found: dict[str, ConnectorPlugin] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {point.name} = {point.value}" + (f" (package {point.dist.name})" if point.dist else "")
        try:
            plugin = point.load()
        except Exception as exc:  # noqa: BLE001 - any import error of a plugin is reported the same way
            raise PluginError(f"connector plugin {where} does not load: {type(exc).__name__}: {exc}") from exc
        if not isinstance(plugin, ConnectorPlugin):
            raise PluginError(f"connector plugin {where} is a {type(plugin).__name__}, not a ConnectorPlugin")
        if plugin.name != point.name:
            raise PluginError(f"connector plugin {where} is named {plugin.name!r}; the entry point must carry "
                              "the same name")
        if plugin.name in found and found[plugin.name] is not plugin:
            raise PluginError(f"connector plugin {where}: another installed package registers {plugin.name} too")
        found[plugin.name] = plugin
    return found


def plugin_for(name_or_class: str) -> ConnectorPlugin | None:
    """The short name or the class name a .properties file carries (`connector.class`)."""
    plugins = installed_plugins()
    by_class = {plugin.java_class: plugin for plugin in plugins.values()}
    return by_class.get(name_or_class) or plugins.get(name_or_class.rsplit(".", 1)[-1])
