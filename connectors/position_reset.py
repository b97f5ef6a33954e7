"""Where a reset moves a bridge's position, per partition, from the places its source shows (`Position.places`):
to the earliest or latest offset, to a time, by a shift, or to given offsets, as `kafka-consumer-groups
--reset-offsets` and Kafka Connect's offsets API (KIP-875) do. Pure: the source is asked by the caller."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from connectors.plugin import Place

PartitionKey = tuple[str, int]  # (source, partition)


class ResetRefused(ValueError):
    """The reset asked for cannot be done as asked; nothing was changed. One line per problem."""


class ResetTarget(BaseModel):
    """Where to move a bridge's position: exactly one way, optionally on some partitions only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    to: Literal["earliest", "latest", "datetime", "shift", "offsets", "snapshot"] = Field(
        description="earliest: the oldest offset the source keeps; latest: its end (skips everything pending); "
                    "datetime: the first offset at or after `at`; shift: `shift_by` from where the next run starts; "
                    "offsets: the given `offsets`; snapshot: a Pub/Sub subscription's `snapshot`")
    at: datetime | None = Field(None, description="for `to: datetime`: an ISO 8601 time (UTC unless it names a zone)")
    shift_by: int | None = Field(None, description="for `to: shift`: records to move forward (negative: replay)")
    offsets: dict[str, int] = Field(default_factory=dict,
                                    description="for `to: offsets`: `source:partition` (or `partition` when the "
                                                "bridge reads one source) -> the next offset to read")
    partitions: tuple[str, ...] = Field((), description="only these partitions (`partition` or "
                                                        "`source:partition`); all when empty")
    clamp: bool = Field(False, description="move an offset past the end or before the start to the end or the start, "
                                           "instead of refusing the reset")
    snapshot: str | None = Field(None, description="for `to: snapshot`: a snapshot id, or its path")


@dataclass(frozen=True)
class PlannedMove:
    source: str
    partition: int
    now: int  # where the next run would start
    new: int

    @property
    def replays(self) -> int:
        return max(0, self.now - self.new)

    @property
    def skips(self) -> int:
        return max(0, self.new - self.now)


def _named(places: tuple[Place, ...], names: tuple[str, ...], what: str, problems: list[str]) -> dict[str, Place]:
    """`source:partition` or `partition` names -> places; an unknown name is a problem."""
    by_key = {f"{place.source}:{place.partition}": place for place in places}
    one_source = len({place.source for place in places}) == 1
    found = {}
    for name in names:
        key = name if ":" in name or not one_source else f"{places[0].source}:{name}"
        if key in by_key:
            found[name] = by_key[key]
        else:
            problems.append(f"{what} {name!r}: no such partition; there are {', '.join(sorted(by_key)) or 'none'}")
    return found


def _checked_time(target: ResetTarget, now: datetime | None, problems: list[str]) -> datetime | None:
    """`target.at` in UTC; a problem when it is missing or in the future."""
    if target.at is None:
        problems.append("--to-datetime: give an ISO 8601 time")
        return None
    at = target.at if target.at.tzinfo else target.at.replace(tzinfo=timezone.utc)
    if at > (now or datetime.now(timezone.utc)):
        problems.append(f"--to-datetime {at.isoformat()}: that is in the future")
        return None
    return at


def plan_reset(places: tuple[Place, ...], target: ResetTarget,
               offsets_at: Callable[[int], dict[PartitionKey, int]] | None = None,
               now: datetime | None = None) -> tuple[PlannedMove, ...]:
    """Each chosen partition's move. `offsets_at(epoch_ms)` gives the first offset at or after a time per partition
    (the end when none is). Raises ResetRefused naming every problem, one line each."""
    problems: list[str] = []
    if target.to == "snapshot":
        raise ResetRefused("--to-snapshot: only a Cloud Pub/Sub source seeks to a snapshot; this source has offsets")
    chosen = places
    if target.partitions:
        named = _named(places, target.partitions, "--partitions", problems)
        chosen = tuple(place for place in places if place in named.values())
    wanted: dict[PartitionKey, int] = {}
    if target.to == "earliest":
        missing = [place for place in chosen if place.start is None]
        if missing:
            problems.append("--to-earliest: the source does not say its oldest offset "
                            f"({', '.join(f'{p.source}:{p.partition}' for p in missing)}); use --to-offset P=0")
        wanted = {(p.source, p.partition): p.start for p in chosen if p.start is not None}
    elif target.to == "latest":
        wanted = {(p.source, p.partition): p.end for p in chosen}
    elif target.to == "shift":
        if target.shift_by is None:
            problems.append("--shift-by: give a number of records (negative replays)")
        else:
            wanted = {(p.source, p.partition): p.next + target.shift_by for p in chosen}
    elif target.to == "datetime":
        at = _checked_time(target, now, problems)
        if at is not None and offsets_at is None:
            problems.append("--to-datetime: this connector's source cannot find an offset by time")
        elif at is not None:
            found = offsets_at(int(at.timestamp() * 1000))
            wanted = {(p.source, p.partition): found[(p.source, p.partition)] for p in chosen}
    else:  # offsets
        if not target.offsets:
            problems.append("--to-offset: give source:partition=offset (or partition=offset)")
        named = _named(places, tuple(target.offsets), "--to-offset", problems)
        wanted = {(place.source, place.partition): target.offsets[name] for name, place in named.items()}
        chosen = tuple(place for place in chosen if (place.source, place.partition) in wanted)
    moves = []
    for place in chosen:
        key = (place.source, place.partition)
        if key not in wanted:
            continue
        new, lowest = wanted[key], place.start if place.start is not None else 0
        if not lowest <= new <= place.end:
            if not target.clamp:
                problems.append(f"{place.source}:{place.partition}: offset {new} is outside what the source keeps "
                                f"({lowest}..{place.end}); --clamp moves it to the nearest")
                continue
            new = min(max(new, lowest), place.end)
        moves.append(PlannedMove(place.source, place.partition, place.next, new))
    if problems:
        raise ResetRefused("\n".join(problems))
    return tuple(moves)


@dataclass(frozen=True)
class PlannedSeek:
    """A subscription's seek (Cloud Pub/Sub keeps the place by acks, not offsets), after a snapshot of where it is."""

    subscription: str
    snapshot_first: str  # taken before the seek; an undo seeks back to it
    to_time_ms: int | None = None  # the seek's time (epoch ms), or
    to_snapshot: str | None = None  # its snapshot

    def describe(self) -> str:
        if self.to_snapshot is not None:
            where = f"snapshot {self.to_snapshot}"
        else:
            where = datetime.fromtimestamp(self.to_time_ms / 1000, tz=timezone.utc).isoformat()
        return f"seek {self.subscription} to {where}, after taking snapshot {self.snapshot_first}"


def plan_seek(target: ResetTarget, subscription: str, snapshot_first: str, snapshot_path: Callable[[str], str],
              now: datetime | None = None) -> PlannedSeek:
    """A subscription's seek for `target`; ResetRefused naming every way it has no meaning for a subscription."""
    now = now or datetime.now(timezone.utc)
    problems = []
    no_offsets = ("Pub/Sub has no offsets: a Cloud Pub/Sub source seeks to --to-datetime, --by-duration, --to-latest, "
                  "--to-earliest, --to-snapshot or --undo")
    if target.to in ("shift", "offsets"):
        problems.append(f"--{'shift-by' if target.to == 'shift' else 'to-offset'}: {no_offsets}")
    if target.partitions:
        problems.append("--partitions: a Pub/Sub subscription has no partitions; a seek moves all of it")
    if target.clamp:
        problems.append("--clamp: a Pub/Sub seek has nothing to clamp (any time and any snapshot of its topic go)")
    seek = PlannedSeek(subscription, snapshot_first)
    if target.to == "snapshot":
        if not target.snapshot:
            problems.append("--to-snapshot: give a snapshot id (or its path)")
        else:
            seek = PlannedSeek(subscription, snapshot_first, to_snapshot=snapshot_path(target.snapshot))
    elif target.to in ("earliest", "latest", "datetime"):
        if target.to == "earliest":  # what the subscription (or its topic) still retains
            at = datetime.fromtimestamp(0, tz=timezone.utc)
        elif target.to == "latest":  # acks everything published before now
            at = now
        else:
            at = _checked_time(target, now, problems)
        if at is not None:
            seek = PlannedSeek(subscription, snapshot_first, to_time_ms=int(at.timestamp() * 1000))
    if problems:
        raise ResetRefused("\n".join(problems))
    return seek
