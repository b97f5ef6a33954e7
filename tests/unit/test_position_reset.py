"""Where a reset moves each partition (connectors/position_reset.py): pure planning from the places a source shows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from connectors.plugin import Place
from connectors.position_reset import ResetRefused, ResetTarget, plan_reset, plan_seek

PLACES = (Place("orders", 0, 40, 40, 10, 100), Place("orders", 1, None, 0, 0, 30))


def moves(target: ResetTarget, places=PLACES, offsets_at=None) -> dict[int, tuple[int, int, int, int]]:
    return {m.partition: (m.now, m.new, m.replays, m.skips) for m in plan_reset(places, target, offsets_at)}


def test_earliest_latest_and_a_shift():
    assert moves(ResetTarget(to="earliest")) == {0: (40, 10, 30, 0), 1: (0, 0, 0, 0)}
    assert moves(ResetTarget(to="latest")) == {0: (40, 100, 0, 60), 1: (0, 30, 0, 30)}
    assert moves(ResetTarget(to="shift", shift_by=-5, partitions=("0",))) == {0: (40, 35, 5, 0)}


def test_a_time_asks_the_source_and_a_future_time_is_refused():
    asked = []

    def offsets_at(epoch_ms: int) -> dict:
        asked.append(epoch_ms)
        return {("orders", 0): 70, ("orders", 1): 30}

    at = datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc)
    assert moves(ResetTarget(to="datetime", at=at), offsets_at=offsets_at) == {0: (40, 70, 0, 30), 1: (0, 30, 0, 30)}
    assert asked == [int(at.timestamp() * 1000)]
    with pytest.raises(ResetRefused, match="is in the future"):
        moves(ResetTarget(to="datetime", at=datetime.now(timezone.utc) + timedelta(hours=1)), offsets_at=offsets_at)


def test_given_offsets_by_partition_or_by_source_and_partition():
    assert moves(ResetTarget(to="offsets", offsets={"1": 12})) == {1: (0, 12, 0, 12)}
    assert moves(ResetTarget(to="offsets", offsets={"orders:0": 15})) == {0: (40, 15, 25, 0)}


def test_every_problem_is_named_at_once_and_clamp_moves_to_the_nearest_end():
    with pytest.raises(ResetRefused) as refused:
        plan_reset(PLACES, ResetTarget(to="offsets", offsets={"7": 1, "0": 5, "1": 31}))
    assert str(refused.value).splitlines() == [
        "--to-offset '7': no such partition; there are orders:0, orders:1",
        "orders:0: offset 5 is outside what the source keeps (10..100); --clamp moves it to the nearest",
        "orders:1: offset 31 is outside what the source keeps (0..30); --clamp moves it to the nearest",
    ]
    assert moves(ResetTarget(to="offsets", offsets={"0": 5, "1": 31}, clamp=True)) == {0: (40, 10, 30, 0),
                                                                                       1: (0, 30, 0, 30)}
    with pytest.raises(ResetRefused, match="--partitions '9': no such partition"):
        plan_reset(PLACES, ResetTarget(to="latest", partitions=("9",)))


def test_earliest_is_refused_where_the_source_does_not_say_its_oldest_offset():
    lite = (Place("projects/p/locations/l/subscriptions/s", 0, 5, 5, None, 9),)
    with pytest.raises(ResetRefused, match="does not say its oldest offset"):
        plan_reset(lite, ResetTarget(to="earliest"))
    assert moves(ResetTarget(to="offsets", offsets={"0": 0}), places=lite) == {0: (5, 0, 5, 0)}


SUBSCRIPTION = "projects/p/subscriptions/orders"


def seek(target: ResetTarget, now: datetime | None = None):
    return plan_seek(target, SUBSCRIPTION, "projects/p/snapshots/before", lambda name: f"projects/p/snapshots/{name}",
                     now)


def test_a_subscription_seeks_to_a_time_to_now_to_the_epoch_or_to_a_snapshot():
    now = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)
    at = datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc)
    assert seek(ResetTarget(to="datetime", at=at), now).to_time_ms == int(at.timestamp() * 1000)
    assert seek(ResetTarget(to="latest"), now).to_time_ms == int(now.timestamp() * 1000)
    assert seek(ResetTarget(to="earliest"), now).to_time_ms == 0
    planned = seek(ResetTarget(to="snapshot", snapshot="nightly"), now)
    assert (planned.to_snapshot, planned.to_time_ms) == ("projects/p/snapshots/nightly", None)
    assert planned.describe() == (f"seek {SUBSCRIPTION} to snapshot projects/p/snapshots/nightly, after taking "
                                  "snapshot projects/p/snapshots/before")


def test_a_subscription_has_no_offsets_partitions_or_future():
    with pytest.raises(ResetRefused) as refused:
        seek(ResetTarget(to="shift", shift_by=5, partitions=("0",), clamp=True))
    assert str(refused.value).splitlines() == [
        "--shift-by: Pub/Sub has no offsets: a Cloud Pub/Sub source seeks to --to-datetime, --by-duration, "
        "--to-latest, --to-earliest, --to-snapshot or --undo",
        "--partitions: a Pub/Sub subscription has no partitions; a seek moves all of it",
        "--clamp: a Pub/Sub seek has nothing to clamp (any time and any snapshot of its topic go)"]
    with pytest.raises(ResetRefused, match="is in the future"):
        seek(ResetTarget(to="datetime", at=datetime.now(timezone.utc) + timedelta(hours=1)))
    with pytest.raises(ResetRefused, match="only a Cloud Pub/Sub source seeks to a snapshot"):
        plan_reset(PLACES, ResetTarget(to="snapshot", snapshot="nightly"))
