"""What every benchmark shares: its own local stack on free ports, a warm engine, a peak-memory probe."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from local_stack.stack import LocalStack
from local_stack.paths import PROJECT_ROOT

BENCH_STACK_HOME = PROJECT_ROOT / ".local" / "bench-stack"


@contextmanager
def bench_stack() -> Iterator[LocalStack]:
    """A fresh stack for one benchmark run; this process's environment points at it."""
    LocalStack(BENCH_STACK_HOME).down(log=lambda line: None)
    shutil.rmtree(BENCH_STACK_HOME, ignore_errors=True)
    stack = LocalStack(BENCH_STACK_HOME, pick_free_ports=True)
    try:  # a server that fails to start stops the ones started before it
        stack.up(log=lambda line: None)
        os.environ.update({k: v for k, v in stack.env().items() if k not in ("DAGSTER_HOME", "BRIDGE_SPARK_REMOTE")})
        yield stack
    finally:
        stack.down(log=lambda line: None)


def stack_services(stack: LocalStack) -> tuple[int, ...]:
    """The process ids of the stack's running services: started by the bench's own process, they are among its
    descendants, and a row that counts that process's tree leaves them out (TreeCpu's `excluded`)."""
    return tuple(s.pid for s in stack.status() if s.pid)


def attached_stack() -> LocalStack:
    """The stack `bench_stack` started, seen from a child process."""
    return LocalStack(BENCH_STACK_HOME)


def fresh_pubsub() -> None:
    """Restart pstest before a measurement that touches Pub/Sub. pstest keeps every message ever
    published in memory (for its Go test-inspection API), so each row would otherwise run slower than
    the last; the real service has no such cost."""
    stack = attached_stack()
    stack.down(log=lambda line: None, only=("pubsub",))
    stack.up(log=lambda line: None, only=("pubsub",))


def warm_engine(engine: str, remote: str | None):
    """The Spark session for `classic` or `connect`, and the seconds it took to get it. A first tiny
    Arrow job starts the Python workers, so no measured row pays for that."""
    from connectors.spark_session import start_python_workers
    from resources.spark import SparkResource

    started = time.monotonic()
    spark = SparkResource(remote=remote if engine == "connect" else None).session()
    start_python_workers(spark)
    return spark, time.monotonic() - started


def run_sink_batch(spark, config, admin, batch, open_writer, group: str):
    """One batch of a Kafka-reading sink through the shared driver, as its plugin runs it, with its writer (each
    sink's write.py); a fresh `group` per run: a batch's delivered commits would start the next one past them."""
    from connectors.framework.sink_plugin import sink_deliver
    from connectors.framework.sink_batch import run_kafka_sink_batch

    return run_kafka_sink_batch(spark, config, admin, {}, batch, group, sink_deliver("bench", config, admin, open_writer))


def run_stamp() -> dict:
    """When, on what and from which code a bench ran, for its results file: the date, the cores, the memory in GB, and
    the commit (with "+changes" when tracked files differ from it, so a row is never credited to code it did not run)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True).stdout.strip()

    with open("/proc/meminfo") as meminfo:
        memory_kb = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1])
    changed = git("status", "--porcelain", "--untracked-files=no")
    return {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "memory_gb": round(memory_kb / 2**20),
            "commit": git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")}


def stamp(results: dict) -> str:
    """When, on what and from which code a results file's rows ran: the commit a bench recorded (run_stamp), else the
    commit that recorded the file (`recorded_in`, for files from before the benches stamped themselves)."""
    machine = f"{results['cores']} cores" + (f", {results['memory_gb']} GB" if "memory_gb" in results else "")
    commit = (f"commit {results['commit']}" if "commit" in results
              else f"recorded in commit {results['recorded_in']}" if "recorded_in" in results else "commit not recorded")
    return f"{results['date']}, {machine}, {commit}"


def write_results(path: Path, results: dict) -> None:
    """A bench's results file, stamped with when, on what and from which code it ran (run_stamp) and with the command
    that ran it; the Measured page draws its table from it (bench/measured.py)."""
    module = ".".join(Path(sys.argv[0]).resolve().relative_to(PROJECT_ROOT).with_suffix("").parts)
    command = " ".join(["python -m", module.removesuffix(".__main__"), *sys.argv[1:]])
    path.write_text(json.dumps({**run_stamp(), "command": command, **results}, indent=1) + "\n")


def rounds_summary(rows: list[dict]) -> dict:
    """Rows of one side over a bench's rounds (records, seconds, cpu_per_100k each): the median records/s and CPU s
    per 100k, with their min and max."""
    rates = sorted(r["records"] / r["seconds"] for r in rows)
    cpus = sorted(r["cpu_per_100k"] for r in rows)
    return {"rate_median": statistics.median(rates), "rate_min": rates[0], "rate_max": rates[-1],
            "cpu_median": statistics.median(cpus), "cpu_min": cpus[0], "cpu_max": cpus[-1]}


SHORTEST_STEADY_S = 20.0


def short_rows_line(sides: dict[str, list[dict]]) -> str:
    """A line naming the sides whose rows (records, seconds each) moved for less than SHORTEST_STEADY_S in the median:
    too short to be steady, their rate says more about the start than about the copy; empty when none did."""
    medians = {name: statistics.median(r["seconds"] for r in rows) for name, rows in sides.items()}
    short = [f"{name} {seconds:.1f} s" for name, seconds in medians.items() if seconds < SHORTEST_STEADY_S]
    if not short:
        return ""
    return (f"Rows shorter than {SHORTEST_STEADY_S:.0f} s of copying (medians): {', '.join(short)}; raise --records "
            "for steady rates.")


def median_spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """`median (min-max)` of a row's repetitions, each formatted by `fmt`; a single value alone."""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def ranges_overlap(ours: list[float], reference: list[float]) -> bool:
    """Whether two sides' min-max over their rounds overlap: then the gap between their medians is noise."""
    return min(ours) <= max(reference) and min(reference) <= max(ours)


def spreads_overlap(ours: dict, reference: dict) -> bool:
    """Whether two rounds_summary's records/s spreads overlap."""
    return ranges_overlap([ours["rate_min"], ours["rate_max"]], [reference["rate_min"], reference["rate_max"]])


def rounds_arguments(description: str, records: int = 1_000_000) -> argparse.ArgumentParser:
    """The options of a bench in rounds: --records (default `records`) and --size per row, --rounds."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    return parser


def _rate_line(row: dict) -> str:
    """A row's rate, and its CPU where it measured it (a whole command's row times the command only)."""
    cpu = f", {row['cpu_per_100k']:.2f} CPU s per 100k" if "cpu_per_100k" in row else ""
    return f"{row['records'] / row['seconds']:,.0f} records/s over {row['seconds']:.1f} s{cpu}"


def alternating_rounds(rounds: int, sides: dict[str, Callable[[int], dict]], say: Callable[[str], object],
                       describe: Callable[[dict], str] = _rate_line) -> dict[str, list[dict]]:
    """Each side's rows, one per round (`sides`: name -> the row of round N), the order turned around every other round
    so that neither side always runs on the warmer machine; `say` is told each row as `describe` puts it."""
    rows: dict[str, list[dict]] = {name: [] for name in sides}
    for round_no in range(rounds):
        for name in (list(sides) if round_no % 2 == 0 else list(sides)[::-1]):
            say(f"round {round_no + 1}: {name} ...")
            row = sides[name](round_no)
            say(f"  {describe(row)}")
            rows[name].append(row)
    return rows
