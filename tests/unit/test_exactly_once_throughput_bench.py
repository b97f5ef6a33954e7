"""bench.exactly_once_throughput's table: each side's median rate over its rounds with its spread, and exactly
once's cost against at least once."""

from bench.exactly_once_throughput import cost, render


def _rows(*rates: int) -> list[dict]:
    return [{"rate_per_s": rate, "cpu_per_100k": 1.0 + i / 10, "records": rate * 60, "seconds": 60.0}
            for i, rate in enumerate(rates)]


def test_the_cost_is_what_exactly_once_loses_of_the_median_rate():
    sides = {"at least once": _rows(40_000, 50_000, 45_000), "exactly once": _rows(36_000, 30_000, 40_000)}
    assert cost(sides) == 20.0
    sides["exactly once"] = _rows(46_000, 47_000, 48_000)
    assert cost(sides) == -4.4  # faster under exactly once: a negative cost, not hidden


def test_the_table_gives_each_sides_median_spread_and_cost():
    results = {"rows": {"KafkaSinkConnector": {"at least once": _rows(100_000, 90_000, 95_000),
                                               "exactly once": _rows(85_500, 80_000, 90_000),
                                               "cost_percent": 10.0}}}
    assert render(results)[2] == ("| KafkaSinkConnector | 95,000 (90,000–100,000) | 85,500 (80,000–90,000) | 10.0 % "
                                  "| 1.10 / 1.10 | 3 |")
