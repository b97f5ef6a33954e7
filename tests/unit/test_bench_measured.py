"""The Measured page is drawn from the results files by each bench's own render (bench/measured.py)."""

from __future__ import annotations

import importlib

from bench.common import median_spread, stamp
from bench.measured import HERE, SECTIONS, _how


def test_every_section_names_a_bench_that_draws_its_files():
    for entry in SECTIONS:
        module = importlib.import_module(f"bench.{entry.module}")
        assert callable(module.render), entry.module
        assert module.__doc__, entry.module
        assert entry.files and all(name.endswith(".json") for name in entry.files), entry


def test_a_row_is_its_median_with_its_spread():
    assert median_spread([3.0, 1.0, 2.0]) == "2 (1-3)"
    assert median_spread([0.25, 0.5], "{:.2f}") == "0.38 (0.25-0.50)"
    assert median_spread([7.0]) == "7"


def test_a_stamp_names_the_commit_a_bench_ran_or_the_one_that_recorded_it():
    assert stamp({"date": "d", "cores": 2, "memory_gb": 24, "commit": "abc"}) == "d, 2 cores, 24 GB, commit abc"
    assert stamp({"date": "d", "cores": 2, "recorded_in": "def"}) == "d, 2 cores, recorded in commit def"


def test_a_benchs_usage_lines_become_one_code_block():
    text = _how("How it measures.\n\n    python -m bench.x [--a]\n    (a stack of its own)\n\nMore.\n- a list item\n")
    assert "```\npython -m bench.x [--a]\n(a stack of its own)\n```" in text
    assert text.count("```") == 2 and "- a list item" in text


def test_the_results_files_the_page_draws_are_there():
    missing = [name for entry in SECTIONS for name in entry.files if not (HERE / name).exists()]
    assert not missing, missing
