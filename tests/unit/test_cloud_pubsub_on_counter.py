"""The counting endpoint bench's table: medians with min-max, the ratio of medians, and a word when spreads overlap."""

from bench.cloud_pubsub_on_counter import render
from bench.common import rounds_summary


def _row(rate: float, cpu_per_100k: float) -> dict:
    return {"records": 1_000_000, "seconds": 1_000_000 / rate, "cpu_per_100k": cpu_per_100k, "peak_mb": 500}


def _results(ours: list[dict], java: list[dict]) -> dict:
    return {"date": "2026-11-28", "cores": 2, "records": 1_000_000, "size": 1024, "rounds": 3,
            "endpoint_limit": 250_000, "ours": ours, "java": java}


def test_a_summary_is_the_median_and_the_min_and_max_of_the_rounds():
    got = rounds_summary([_row(90_000, 3.0), _row(100_000, 2.0), _row(60_000, 4.0)])
    assert (round(got["rate_median"]), round(got["rate_min"]), round(got["rate_max"])) == (90_000, 60_000, 100_000)
    assert (got["cpu_median"], got["cpu_min"], got["cpu_max"]) == (3.0, 2.0, 4.0)


def test_the_ratio_is_of_medians_and_overlapping_spreads_are_said():
    apart = render(_results([_row(r, 2.0) for r in (90_000, 100_000, 95_000)],
                            [_row(r, 8.0) for r in (40_000, 50_000, 45_000)]))
    assert "**2.11x** the records/s" in apart and "**0.25x** the CPU" in apart
    assert "| the endpoint's limit (a Go client publishing as fast as it answers) | 250,000 |" in apart
    assert "overlap" not in apart
    close = render(_results([_row(r, 2.0) for r in (60_000, 100_000, 80_000)],
                            [_row(r, 2.0) for r in (70_000, 75_000, 72_000)]))
    assert "The two spreads overlap" in close


def test_where_our_cpu_goes_is_the_median_of_each_process_kind():
    ours = [{**_row(90_000, 2.0), "cpu_split_per_100k": {"engine JVM": jvm, "Python workers": 1.0}}
            for jvm in (0.5, 0.7, 0.9)]
    table = render(_results(ours, [_row(45_000, 4.0)] * 3))
    assert "Where ours' CPU goes (CPU s per 100k, medians): Python workers 1.00, engine JVM 0.70." in table


def test_a_source_table_has_no_endpoint_limit_row():
    results = {**_results([_row(90_000, 2.0)] * 3, [_row(45_000, 4.0)] * 3), "connector": "source"}
    del results["endpoint_limit"]
    table = render(results)
    assert "the Cloud Pub/Sub source" in table and "endpoint's limit" not in table and "**2.00x**" in table


def test_the_always_on_rows_have_their_line_and_ratio_beside_the_batch_ones():
    results = {**_results([_row(90_000, 2.0)] * 3, [_row(45_000, 4.0)] * 3),
               "ours_always_on": [_row(r, 1.5) for r in (120_000, 135_000, 150_000)]}
    table = render(results)
    assert "| ours, always on | 135,000 (120,000-150,000) | 1.50 (1.50-1.50) | 500 |" in table
    assert "Always on ÷ Java: **3.00x** the records/s at **0.38x** the CPU per record." in table
    assert "always on" not in render(_results([_row(90_000, 2.0)] * 3, [_row(45_000, 4.0)] * 3))
