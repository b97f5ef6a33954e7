"""bench.exactly_once_always_on's table: each side's median p50 and p99 over its rounds, with their spread."""

from bench.exactly_once_always_on import render


def test_the_table_gives_each_sides_medians_and_spread():
    row = lambda p50, p99: {"p50_s": p50, "p99_s": p99, "max_s": 1.0, "records": 100}  # noqa: E731
    results = {"rows": {"KafkaSinkConnector": {
        "at least once": [row(0.04, 0.08), row(0.03, 0.07), row(0.05, 0.09)],
        "exactly once": [row(0.2, 0.5), row(0.06, 0.1), row(0.07, 0.2)]}}}
    lines = render(results)
    assert lines[2] == "| KafkaSinkConnector | at least once | 0.040 s (0.030–0.050) | 0.080 s (0.070–0.090) | 3 |"
    assert lines[3] == "| KafkaSinkConnector | exactly once | 0.070 s (0.060–0.200) | 0.200 s (0.100–0.500) | 3 |"
