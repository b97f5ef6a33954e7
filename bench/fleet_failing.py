"""A host's bridges beside one that fails: `dagster dev` on a bridges file of N always-on Cloud Pub/Sub sinks in the
host `default` (as `python -m bench.fleet`), with and without one more bridge in the same host whose Pub/Sub topic does
not exist (it fails at its first record and is started again, for the whole run, while its topic gets the same
traffic). Rows alternate, several rounds; each reports the N healthy bridges' send -> Pub/Sub publish time (p50, p99)
and CPU, and the failing bridge's `batch_succeeded` evaluations (it must fail at every look). Target: the healthy
bridges' p99 beside the failing one within 10 % of theirs without it.

    python -m bench.fleet_failing [--bridges 3] [--rate 20] [--seconds 60] [--rounds 3]
    (a stack of its own, like python -m bench)
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
from pathlib import Path
from typing import Callable

from bench.common import alternating_rounds, bench_stack, ranges_overlap, write_results
from bench.fleet import ours
from local_stack.paths import PROJECT_ROOT

SIDES = {"alone": 0, "beside a failing bridge": 1}


def _describe(row: dict) -> str:
    return (f"{row['bridges']} healthy bridges: p50 {row['p50_s']} s, p99 {row['p99_s']} s, max {row['max_s']} s; the "
            f"failing bridge's batch_succeeded evaluations: {row.get('failing_bridges_checks', 'none (none failing)')}")


def _summary(rows: list[dict]) -> dict:
    """The median and min-max over the rounds of what a row says of the healthy bridges."""
    summary = {}
    for figure in ("p50_s", "p99_s", "max_s"):
        values = sorted(row[figure] for row in rows)
        summary[figure] = {"median": statistics.median(values), "min": values[0], "max": values[-1]}
    cpu = sorted(row["steady"]["cpu_pct_total"] for row in rows)
    summary["steady_cpu_percent"] = {"median": statistics.median(cpu), "min": cpu[0], "max": cpu[-1]}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bridges", type=int, default=3, help="healthy bridges in the host")
    parser.add_argument("--rate", type=float, default=20, help="records/s per bridge")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "fleet_failing.json"))
    args = parser.parse_args()
    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        engine_pid = {s.name: s.pid for s in stack.status()}["spark"]

        def fleet(failing: int) -> Callable[[int], dict]:
            return lambda _round: ours(args.bridges, args.rate, args.seconds, remote, engine_pid, "hosted", failing)

        rows = alternating_rounds(args.rounds, {side: fleet(failing) for side, failing in SIDES.items()},
                                  functools.partial(print, flush=True), _describe)
    summaries = {side: _summary(side_rows) for side, side_rows in rows.items()}
    alone, beside = (summaries[side]["p99_s"] for side in SIDES)
    result = {"bridges": args.bridges, "rate_per_bridge": args.rate, "seconds": args.seconds, "rounds": args.rounds,
              "summary": summaries, "p99_beside_over_alone": round(beside["median"] / alone["median"], 3),
              "p99_spreads_overlap": ranges_overlap([alone["min"], alone["max"]], [beside["min"], beside["max"]]),
              "rows": rows}
    write_results(Path(args.out), result)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))



def render(results: dict) -> str:
    """The healthy bridges' latency and CPU alone and beside a failing bridge, medians (min-max) of the rounds."""
    lines = [f"{results['bridges']} healthy bridges, {results['rate_per_bridge']} records/s each for "
             f"{results['seconds']} s, {results['rounds']} rounds alternating. Medians (min-max).", "",
             "| healthy bridges | p50 | p99 | max | steady CPU (% of a core) |", "| --- | --- | --- | --- | --- |"]

    def cell(stat: dict, fmt: str) -> str:
        return f"{fmt.format(stat['median'])} ({fmt.format(stat['min'])}-{fmt.format(stat['max'])})"

    for name, s in results["summary"].items():
        lines.append(f"| {name} | {cell(s['p50_s'], '{:.3f}')} s | {cell(s['p99_s'], '{:.3f}')} s | "
                     f"{cell(s['max_s'], '{:.3f}')} s | {cell(s['steady_cpu_percent'], '{:.1f}')} |")
    lines += ["", f"p99 beside a failing bridge ÷ alone: **{results['p99_beside_over_alone']:.3f}** (target: at most "
              "1.10)" + ("; the spreads overlap." if results.get("p99_spreads_overlap") else ".")]
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
