from dagster import ConfigurableResource
from pydantic import Field

from jobs.lease import LeaseTiming


class BridgeLeaseResource(ConfigurableResource):
    """How a run holding a bridge's lease proves it is alive, and when a silent holder is fenced."""

    heartbeat_seconds: float = Field(5.0, gt=0, description="How often the holder writes its heartbeat")
    stale_after_seconds: float = Field(
        30.0, gt=0, description="A holder silent this long is taken to be dead: its run is marked failed and "
                                "its lease given to the next run (BRIDGE_LEASE_STALE_AFTER_SECONDS)")

    def timing(self) -> LeaseTiming:
        if self.stale_after_seconds <= 2 * self.heartbeat_seconds:
            raise ValueError(f"bridge_lease: stale_after_seconds ({self.stale_after_seconds}) must be more than "
                             f"twice heartbeat_seconds ({self.heartbeat_seconds})")
        return LeaseTiming(self.heartbeat_seconds, self.stale_after_seconds)
