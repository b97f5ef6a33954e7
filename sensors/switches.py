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
    # One read of the sensors turned on or off: one never touched has no state or DECLARED_IN_CODE (its default
    # applies either way). Read every second by a host's run; skipping the default states (a fleet's every switch and
    # keeper) took a read of sixty sensors from 15 ms to 6 ms.
    stored = {state.name: state.status for state in instance.all_instigator_state(
        instigator_type=InstigatorType.SENSOR, instigator_statuses={InstigatorStatus.RUNNING, InstigatorStatus.STOPPED})}
    on = set()
    for bridge in bridges:
        status = stored.get(switch_name(bridge), InstigatorStatus.DECLARED_IN_CODE)
        if status == InstigatorStatus.RUNNING or (status == InstigatorStatus.DECLARED_IN_CODE and bridge.sensor.enabled):
            on.add(bridge.name)
    return on


# A hosted bridge stopped on a record that can never pass (errors.tolerance=none): it stays stopped, in this host
# run and the next ones, until it is switched off (and on again), as a Kafka Connect task that failed stays failed
# until it is restarted.
def _stopped_key(bridge: str) -> str:
    return f"kafka-pubsub-bridge/stopped-on-record/{bridge}"


def hold_stopped(instance: DagsterInstance, bridge: str, cause: str) -> None:
    instance.run_storage.set_cursor_values({_stopped_key(bridge): cause})


def stopped_because(instance: DagsterInstance, bridge: str) -> str | None:
    """The one-line cause a bridge was stopped for, while it is held stopped."""
    return instance.run_storage.get_cursor_values({_stopped_key(bridge)}).get(_stopped_key(bridge)) or None


def release_stopped(instance: DagsterInstance, bridge: str) -> bool:
    """Whether it was held stopped (no longer)."""
    if stopped_because(instance, bridge) is None:
        return False
    instance.run_storage.set_cursor_values({_stopped_key(bridge): ""})
    return True
