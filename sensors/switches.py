"""A hosted bridge's sensor is its switch (on in the UI or `bridgectl bridges start`: its host's run moves it;
off: the run ends it after its commit); the host's run and keeper read the switches from the instance."""

from __future__ import annotations

from dagster import DagsterInstance
from dagster._core.scheduler.instigation import InstigatorStatus, InstigatorType

from connectors.plugin import Bridge


def switch_name(bridge: Bridge) -> str:
    return f"{bridge.name}_switch"


def switched_on(instance: DagsterInstance, bridges: list[Bridge]) -> set[str]:
    """The bridges whose switch is on: turned on, or never touched and on by default (`sensor.enabled`)."""
    # One read of every sensor's stored state: a sensor never turned on or off has none (its default applies).
    stored = {state.name: state.status for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)}
    on = set()
    for bridge in bridges:
        status = stored.get(switch_name(bridge), InstigatorStatus.DECLARED_IN_CODE)
        if status == InstigatorStatus.RUNNING or (status == InstigatorStatus.DECLARED_IN_CODE and bridge.sensor.enabled):
            on.add(bridge.name)
    return on
