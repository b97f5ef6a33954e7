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
    assert said[:2] == ["round 1: reference ...", "  10,000 records/s, 1.00 CPU s per 100k"]
    assert not spreads_overlap(rounds_summary(rows["ours"]), rounds_summary(rows["reference"]))
