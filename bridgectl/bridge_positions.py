"""A bridge's place in its source, for `bridgectl bridges offsets`: the position its latest materialization
records (the one source of truth for resuming), per partition beside where the source starts and ends, read
with admin calls, never consuming."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dagster import AssetKey, DagsterInstance

from asset_metadata import position_record
from connectors.plugin import Bridge, Place, Systems


@dataclass(frozen=True)
class BridgePlaces:
    bridge: str
    connector: str
    unit: str  # what an offset counts: records, messages
    kept_by_source: str | None  # the connector keeps no position: who does (its route), else None
    recorded_at: float | None  # when the latest position was recorded (epoch seconds); None: never
    run_id: str | None  # the run that recorded it
    places: tuple[Place, ...]

    @property
    def lag(self) -> int:
        return sum(place.lag for place in self.places)

    def as_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["places"] = [{**asdict(place), "lag": place.lag} for place in self.places]
        document["lag"] = self.lag
        return document


def bridge_places(instance: DagsterInstance, bridge: Bridge, systems: Systems) -> BridgePlaces:
    plugin = bridge.plugin
    common = {"bridge": bridge.name, "connector": bridge.connector, "unit": plugin.keys.unit}
    position = plugin.position
    if position is None or position.source is None:
        return BridgePlaces(**common, kept_by_source=plugin.route(bridge), recorded_at=None, run_id=None, places=())
    recorded = position_record(instance, AssetKey(bridge.name), position)
    try:
        places = position.source.places(systems, bridge.with_secrets(), recorded.value)
    except Exception as exc:  # a client's own error (unreachable, refused): one line naming the bridge
        raise RuntimeError(f"bridge {bridge.name}: reading where its source starts and ends failed: "
                           f"{type(exc).__name__}: {exc}") from exc
    return BridgePlaces(**common, kept_by_source=None, recorded_at=recorded.timestamp, run_id=recorded.run_id,
                        places=places)
