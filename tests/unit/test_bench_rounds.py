"""Benches in rounds: the order of the sides turns around every other round, and each side keeps its rows."""

from bench.common import alternating_rounds, ranges_overlap, rounds_summary, spreads_overlap


def test_the_order_turns_around_every_other_round_and_each_side_keeps_its_rows():
    ran: list[tuple[str, int]] = []

    def side(name: str, rate: float):
        def row(round_no: int) -> dict:
            ran.append((name, round_no))
            return {"records": 100_000, "seconds": 100_000 / rate, "cpu_per_100k": 1.0}
        return row

    said: list[str] = []
    rows = alternating_rounds(3, {"reference": side("reference", 10_000), "ours": side("ours", 20_000)}, said.append)
    assert ran == [("reference", 0), ("ours", 0), ("ours", 1), ("reference", 1), ("reference", 2), ("ours", 2)]
    assert [len(rows["reference"]), len(rows["ours"])] == [3, 3]
    assert said[:2] == ["round 1: reference ...", "  10,000 records/s over 10.0 s, 1.00 CPU s per 100k"]
    assert not spreads_overlap(rounds_summary(rows["ours"]), rounds_summary(rows["reference"]))


def test_a_fleet_side_is_summarised_by_the_median_and_the_spread_of_its_rounds():
    from bench.fleet_failing import _summary

    rows = [{"p50_s": p50, "p99_s": p99, "max_s": p99 * 2, "steady": {"cpu_pct_total": cpu}}
            for p50, p99, cpu in ((0.07, 0.13, 20.0), (0.05, 0.30, 25.0), (0.06, 0.12, 22.0))]
    summary = _summary(rows)
    assert summary["p99_s"] == {"median": 0.13, "min": 0.12, "max": 0.30}
    assert summary["p50_s"]["median"] == 0.06 and summary["max_s"]["max"] == 0.6
    assert summary["steady_cpu_percent"] == {"median": 22.0, "min": 20.0, "max": 25.0}


def test_a_fleet_of_several_rounds_shows_medians_spreads_and_the_ratios_of_the_medians():
    from bench.fleet import render

    def row(steady: float, idle: float, mb: int, p99: float, by_process: dict | None = None) -> dict:
        split = by_process or {"run workers": steady}
        return {"p50_s": 0.1, "p99_s": p99, "all_bridges_moving_s": 20.0, "all_moving_after_run_start_s": 6.0,
                "steady": {"cpu_pct_total": steady, "cpu_pct": split, "rss_mb_total": mb, "rss_mb": {"run workers": mb}},
                "idle": {"cpu_pct_total": idle, "cpu_pct": {"run workers": idle}}}

    results = {"rate_per_bridge": 20, "seconds": 60, "rounds": 3, "ours": {"30": [
        row(60.0, 15.0, 1800, 0.3), row(50.0, 14.0, 1900, 0.2, {"run workers": 30.0, "daemon": 20.0}),
        row(70.0, 16.0, 2000, 0.4)]},
        "java": {"30": [row(40.0, 3.0, 600, 0.2), row(45.0, 2.0, 900, 0.3), row(55.0, 4.0, 700, 0.25)]}}
    page = render(results)
    assert "| 30 | ours, one host | 60.0 (50.0-70.0) | 15.0 (14.0-16.0) | 1,900 (1,800-2,000) |" in page
    # steady 60 / 45; idle 15 / 3, apart; memory 1,900 / 700; p99 0.3 / 0.25
    assert "| 30 | 1.33x *overlapping* | 5.00x | 2.71x | 1.20x *overlapping* |" in page
    assert "| daemon |" not in page  # the split is of the median round (steady 60 %), not of the lowest


def test_two_sides_overlap_when_their_min_max_ranges_share_a_point():
    assert ranges_overlap([1.0, 3.0, 2.0], [3.0, 5.0])
    assert ranges_overlap([4.0], [3.0, 5.0])
    assert not ranges_overlap([1.0, 2.9], [3.0, 5.0])
    assert not ranges_overlap([5.1, 6.0], [3.0, 5.0])
