"""What every benchmark shares: its own local stack on free ports, a warm Spark session, one table."""

from __future__ import annotations

import argparse
import os
import shutil
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.table import Table

from bridgectl.local_stack import LocalStack
from bridgectl.paths import PROJECT_ROOT


@contextmanager
def bench_stack() -> Iterator[frozenset[int]]:
    """Start a fresh stack, point this process at it, and yield the servers' pids (to leave them
    out of the bridge's memory figure)."""
    home = PROJECT_ROOT / ".local" / "bench-stack"
    LocalStack(home).down(log=lambda line: None)
    shutil.rmtree(home, ignore_errors=True)
    stack = LocalStack(home, pick_free_ports=True)
    stack.up(log=lambda line: None)
    os.environ.update({k: v for k, v in stack.env().items() if k != "DAGSTER_HOME"})
    try:
        yield frozenset(s.pid for s in stack.status())
    finally:
        stack.down(log=lambda line: None)


def warm_spark():
    """The Spark session, and the seconds its start took (kept out of the throughput numbers).
    A first tiny Arrow job starts Spark's Python workers, so no measured row pays for that."""
    from resources.spark import SparkResource

    started = time.monotonic()
    spark = SparkResource().session()
    spark.range(0, 4, 1, 2).mapInArrow(lambda batches: batches, "id long").collect()
    return spark, time.monotonic() - started


class ResultTable:
    def __init__(self) -> None:
        self.table = Table("record size", "settings", "records", "seconds", "records/s", "MB/s", "peak memory (MB)")

    def add(self, size: int, label: str, records: int, seconds: float, peak_bytes: int) -> None:
        self.table.add_row(f"{size} B", label, f"{records:,}", f"{seconds:.1f}", f"{records / seconds:,.0f}",
                           f"{records * size / seconds / 1e6:.2f}", f"{peak_bytes / 1e6:,.0f}")

    def print(self, spark_start_s: float, note: str) -> None:
        console = Console()
        console.print(self.table)
        console.print(f"Spark session start (not in the numbers above): {spark_start_s:.1f} s; "
                      f"{os.cpu_count()} cores; {note}")


def run_benchmark(run: Callable[[argparse.Namespace, frozenset[int]], None], records: int, sizes: str) -> None:
    """Parse the common flags, start a fresh stack, and run one benchmark against it."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--sizes", default=sizes, help="record sizes in bytes, comma-separated")
    parser.add_argument("--partitions", type=int, default=4, help="Kafka partitions")
    args = parser.parse_args()
    with bench_stack() as server_pids:
        run(args, server_pids)
