"""A run's failure in one line: the bridge, the system that failed and the cause, never a secret."""

from connectors.errors import root_cause
from connectors.plugin import Bridge


def failure_line(bridge: Bridge, exc: BaseException) -> str:
    system, cause = root_cause(exc)
    return f"bridge {bridge.name} ({system or bridge.plugin.route(bridge)}): {cause}"
