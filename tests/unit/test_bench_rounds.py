"""Benches in rounds: the order of the sides turns around every other round, and each side keeps its rows."""

from bench.common import alternating_rounds, rounds_summary, spreads_overlap


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
