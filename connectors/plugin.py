"""The interface a connector implements to become a bridge: one `ConnectorPlugin` value, declared in the
connector's own `plugin.py` and registered as a Python entry point in the group `kafka_pubsub_bridge.connectors`
(see connectors/plugins.py). The Dagster layer builds every bridge's asset, job, sensor and checks from these
declarations alone, so a connector never names Dagster and Dagster code never names a connector.

Everything here is plain data: a batch reports ints, floats, strings, JSON-able dicts and lists and `Table`s;
the Dagster layer turns them into metadata.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal, Protocol, Union

from connectors.bridge import DEFAULT_GROUP, BatchSettings, CheckSettings, ContinuousSettings, SensorSettings
from connectors.config.common import ConnectorConfig, ExactlyOnceKeys
from connectors.endpoints import Endpoint

ENTRY_POINT_GROUP = "kafka_pubsub_bridge.connectors"


class Systems(Protocol):
    """The shared systems a connector reaches, by the names it lists in `ConnectorPlugin.systems` (each an
    attribute: `systems.kafka.admin()`, `systems.pubsub.connection_for(config)`,
    `systems.pubsublite.connection_for(config)`, `systems.spark.batch_session(bridge_name)`)."""

    def __getattr__(self, name: str) -> Any: ...


@dataclass(frozen=True)
class Table:
    """Rows shown as a table (the Kafka sinks' per-partition view)."""

    columns: tuple[tuple[str, str], ...]  # (name, type): "string", "int", "float"
    rows: tuple[dict[str, Any], ...]


Value = Union[int, float, str, dict, list, Table]


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did; one shape for every connector."""

    moved: int  # records (or messages) that reached the target
    position: Any  # where the next batch starts (recorded under `Position.metadata_key`); None: nothing kept
    values: dict[str, Value]  # recorded with the batch (counts, lag, rate, tables)
    counters: tuple[str, ...]  # names in `values` that add up over the batches of a continuous run
    line: str  # one line for the run's log
    warnings: tuple[str, ...] = ()
    duration_s: float = 0.0


class Stream(Protocol):
    """An always-on bridge moving records as they arrive (continuous mode), started by `ConnectorPlugin.open_stream`
    from a position; the run reads its progress every commit interval."""

    def progress(self) -> BatchReport:
        """What the target acknowledged since the last call (counters), and the position past it."""
        ...

    def raise_if_ended(self) -> None:
        """Raises the stream's failure, or an error saying it ended, once it no longer moves records."""
        ...

    def stop(self) -> None:
        """Stops moving; what was acknowledged before is in the next `progress()`."""
        ...


@dataclass(frozen=True)
class Place:
    """One partition of a bridge's source: where the bridge stands beside where the source starts and ends."""

    source: str  # the topic or subscription read
    partition: int
    recorded: int | None  # the next offset the recorded position names; None: nothing recorded for it yet
    next: int  # where the next run starts: `recorded`, else where the connector's initial rule puts it
    start: int | None  # the oldest offset the source still keeps; None: the source does not say
    end: int  # where the source ends now

    @property
    def lag(self) -> int:
        return max(0, self.end - self.next)


@dataclass(frozen=True)
class Position:
    """How a connector's position is recorded as JSON in the bridge's latest materialization, the one source
    of truth for resuming."""

    metadata_key: str
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]  # also given None (nothing recorded yet)
    # How the position is shown and moved against its source, for `bridgectl bridges offsets`; None: it is not.
    source: SourcePlaces | None = None


PartitionKey = tuple[str, int]  # (source, partition), as a Place names it


@dataclass(frozen=True)
class SourcePlaces:
    """A position against its source: shown per partition and moved by a reset (admin calls, never consuming)."""

    places: Callable[[Systems, Bridge, Any], tuple[Place, ...]]  # the partitions beside a recorded position
    moved: Callable[[Any, dict[PartitionKey, int]], Any]  # the position with these partitions' next offsets
    # The first offset at or after a time (epoch ms) per partition, the end where there is none; None: not by time.
    offsets_at: Callable[[Systems, Bridge, int], dict[PartitionKey, int]] | None = None
    # After a reset: moves the copy of the position kept elsewhere (Kafka Connect's group) to the new one.
    mirror: Callable[[Systems, Bridge, Any], None] | None = None
    # Whether `mirror` also moves the position kept in Kafka transactions under exactly.once.support=required (a
    # reset of a bridge whose connector does not is refused then: its runs would resume from the transactions).
    moves_transactions: bool = False


@dataclass(frozen=True)
class SubscriptionSeek:
    """A source whose subscription keeps the place (Cloud Pub/Sub, by acks): a reset is the subscription's seek to a
    time or to a snapshot, after a snapshot of where it is now, so that the reset can be undone."""

    subscription: Callable[[Bridge], str]  # the subscription's path
    snapshot_path: Callable[[Bridge, str], str]  # a snapshot id -> its path, in the subscription's project
    retains_acked: Callable[[Systems, Bridge], bool]  # whether a seek back in time brings acked messages back too
    take_snapshot: Callable[[Systems, Bridge, str], None]  # of the subscription now, at this path
    seek_to_time: Callable[[Systems, Bridge, int], None]  # epoch ms
    seek_to_snapshot: Callable[[Systems, Bridge, str], None]  # a snapshot path
    # After a seek under exactly.once.support=required: clears what the Kafka transactions hold of earlier deliveries
    # (else a message the seek brings back could be taken for one delivered already); None: such a reset is refused.
    after_seek_in_transactions: Callable[[Systems, Bridge], None] | None = None


@dataclass(frozen=True)
class Waiting:
    amount: int  # records or messages not moved yet (0: nothing to do)
    head: Any  # where the source's end is now; a new head means a new run request


@dataclass(frozen=True)
class Signal:
    """The cheap question a bridge's sensor asks (admin calls, never consuming): how much is waiting past a
    position. A connector without one gets a sensor that starts a run every interval."""

    name: str  # what is waiting, in the sensor's name (`<bridge>_<name>_sensor`): "lag", "backlog"
    systems: tuple[str, ...]  # the shared systems the question needs
    waiting: Callable[[Systems, Bridge, Any], Waiting]


@dataclass(frozen=True)
class ReportKeys:
    """What a connector's batch values mean, for the bridge's asset checks and its stats."""

    unit: str  # "records", "messages"
    read: str  # name of the count taken from the source
    delivered: str  # name of the count that reached the target
    lag: str | None  # name of what is left to move; None: the connector cannot see it
    rejected: tuple[str, ...]  # counters of records that did not reach the target as themselves
    # The other counters operators watch, as the metrics they feed (`bridge_<metric>_total`, one of
    # COUNTED_METRICS) -> the value that adds to it. Read and delivered always feed records_read/_delivered.
    counted: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        unknown = [metric for metric, _ in self.counted if metric not in COUNTED_METRICS]
        if unknown:
            raise ValueError(f"ReportKeys.counted names {unknown}: metrics are {', '.join(COUNTED_METRICS)}")


# What a connector's counters may feed besides records read and delivered (`bridge_<name>_total`).
COUNTED_METRICS = ("records_dead_lettered", "records_dropped", "records_skipped", "records_dead_letter_refused",
                   "bytes_read", "bytes_written")


PARTITION_ORDER_KEPT = "its delivery keeps each partition's records in order"


@dataclass(frozen=True)
class ConnectorPlugin:
    name: str  # what a bridge names in `connector:` (the reference connector's short class name)
    java_class: str  # `connector.class` of the reference connector's .properties files
    config_model: type[ConnectorConfig]  # Kafka Connect keys, validated when the bridges file loads
    kinds: tuple[str, ...]  # the systems it joins, shown as kind tags
    systems: tuple[str, ...]  # shared systems a batch uses: "kafka", "pubsub", "pubsublite", "spark"
    route: Callable[[Bridge], str]  # one line: from where to where
    run_batch: Callable[[Systems, Bridge, Any], BatchReport]  # one micro-batch from a position
    position: Position | None  # None: the source system keeps the cursor (Pub/Sub acks)
    signal: Signal | None
    reads: Callable[[Bridge, Systems], tuple[Endpoint, ...]]  # for the lineage page
    writes: Callable[[Bridge], tuple[Endpoint, ...]]
    keys: ReportKeys
    # Between the batches of a continuous run: anything to move past a position? Default: the signal's amount.
    watcher: Callable[[Systems, Bridge], Callable[[Any], bool]] | None = None
    # Continuous mode's always-on delivery, started from a position; None: a continuous run loops `run_batch`.
    open_stream: Callable[[Systems, Bridge, Any], Stream] | None = None
    # Why this config's delivery needs each Kafka partition's records in order (then batch.min_partitions never
    # splits its ranges), or None when order does not matter to it. Undeclared: order is needed.
    partition_order: Callable[[ConnectorConfig], str | None] = lambda config: PARTITION_ORDER_KEPT
    # The modes ("batch", "continuous") in which its config's exactly.once.support=required is built.
    exactly_once_modes: tuple[str, ...] = ()
    # For a connector without a position of its own: how a reset seeks its subscription; None: it cannot.
    seek: SubscriptionSeek | None = None
    # A minimal working config as a .properties file gives it (`name` first, then the connector's keys): the docs
    # page shows it as a bridges-file entry and as a .properties file, and a test loads both. Empty: none shown.
    example: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.signal is None and self.watcher is None and self.open_stream is None:
            raise ValueError(f"connector plugin {self.name}: give a signal, a watcher or a stream "
                             "(continuous mode needs one)")

    def has_stream(self, bridge: Bridge) -> bool:
        """Whether `bridge` moves as an always-on stream in continuous mode (else its run loops micro-batches)."""
        return self.open_stream is not None

    def watch(self, systems: Systems, bridge: Bridge) -> Callable[[Any], bool]:
        if self.watcher is not None:
            return self.watcher(systems, bridge)
        signal = self.signal
        return lambda position: signal.waiting(systems, bridge, position).amount > 0


@dataclass(frozen=True)
class Bridge:
    """A bridge as the rest of the product sees it: its name, its connector plugin with the validated config, and
    its settings (connectors/bridge.py); every connector's batch code is handed one."""

    name: str
    plugin: ConnectorPlugin
    config: ConnectorConfig
    batch: BatchSettings
    sensor: SensorSettings
    mode: Literal["batch", "continuous"] = "batch"
    continuous: ContinuousSettings = ContinuousSettings()
    group: str = DEFAULT_GROUP
    checks: CheckSettings = CheckSettings()

    @property
    def max_lag(self) -> int:
        return self.batch.max_records if self.checks.max_lag is None else self.checks.max_lag

    @property
    def connector(self) -> str:
        return self.plugin.name

    @property
    def host(self) -> str | None:
        """The host whose shared always-on run moves this bridge; None for a bridge moved by runs of its own."""
        return self.continuous.host if self.mode == "continuous" else None

    @property
    def exactly_once(self) -> bool:
        """exactly.once.support=required (only a connector whose config has the key can say it)."""
        return isinstance(self.config, ExactlyOnceKeys) and self.config.exactly_once

    def with_secrets(self) -> Bridge:
        """This bridge with its secret keys' references resolved (Kafka Connect's config providers), for the
        run or sensor that uses them; a reference that cannot be resolved raises a one-line ValueError naming
        the key and where it looked."""
        from connectors.config.providers import ConfigProviderError, resolve

        fields = type(self.config).model_fields
        updates = {}
        for name, field in fields.items():
            value = getattr(self.config, name)
            if (field.alias or name) in self.config.secret_keys() and value is not None:
                text = value.get_secret_value()
                try:
                    resolved = resolve(field.alias or name, text)
                except ConfigProviderError as exc:
                    raise ValueError(str(exc)) from None
                if resolved != text:
                    updates[name] = type(value)(resolved)
        if not updates:
            return self
        return dataclasses.replace(self, config=self.config.model_copy(update=updates))

    @property
    def consumer_group(self) -> str:
        """The group Kafka Connect would use for this sink, so committed offsets carry over."""
        return f"connect-{self.name}"
