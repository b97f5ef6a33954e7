"""The Cloud Pub/Sub sink beside the Java connector with no emulator between, in rounds (about 8 minutes on 2 cores):

    python -m bench.cloud_sink_on_counter [--records 1000000] [--size 1024] [--rounds 3]

Both point at the counting Pub/Sub endpoint (bench.pubsub_counter), which answers Publish and keeps nothing, so
neither meets pstest's ceiling near 40,000 messages/s. Each round measures, one after the other on one fresh stack,
the released Java connector (1.3.3, tasks.max=2, seed defaults) on a warm Kafka Connect worker (bench.java_reference,
through its TLS front) and ours at seed defaults in one micro-batch on the warm Spark Connect engine
(bench.throughput, after its untimed warm-up batch); the order alternates from round to round. Every row moves
`--records` records (20 s or more of steady state at 1 KiB), and the endpoint's count must show they arrived. A row
of the endpoint's own limit comes first: a Go client publishing to it as fast as it answers.
Prints medians with min-max and the ratio of the medians, says when a spread is wider than the gap between the two,
and writes bench/cloud_sink_on_counter.json.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from bench.common import (
    BENCH_STACK_HOME, alternating_rounds, bench_stack, rounds_arguments, rounds_summary, spreads_overlap,
)
from bench.data import kafka_topic, pubsub_topic, unique_name
from bench.java_reference import java_reference
from bench.pubsub_counter import PubSubCounter, flood, running_counter

OUT = Path(__file__).resolve().parent / "cloud_sink_on_counter.json"
PARTITIONS = 4


def java_row(counter: PubSubCounter, admin, topic: str, warm_up_topic: str, records: int, round_no: int) -> dict:
    """The warm Java sink moving `topic` (its warm-up connector moves `warm_up_topic` first, in the same JVM)."""
    folder = BENCH_STACK_HOME / f"java-reference-{round_no}"
    shutil.rmtree(folder, ignore_errors=True)
    before = counter.stats()["published"]["messages"]
    with java_reference(folder) as reference:
        destination, _ = pubsub_topic(unique_name("java-sink"), subscribe=False)
        row = reference.sink(admin, topic, destination.rsplit("/", 1)[-1], records, tasks_max=2,
                             warm_up_topic=warm_up_topic)
    return _arrived(row, counter, before, 2 * records, "the Java connector")


def our_row(counter: PubSubCounter, records: int, size: int) -> dict:
    """Ours at seed defaults on the warm Spark Connect engine, after its warm-up batch of as many records."""
    before = counter.stats()["published"]["messages"]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.throughput", "--engine", "connect", "--records", str(records),
                        "--sizes", str(size), "--only", "CloudPubSubSinkConnector",
                        "--cloud-sink-settings", "seed defaults", "--out", out.name], check=True)
        rows = json.loads(Path(out.name).read_text())["rows"]
    (row,) = rows
    row = {"records": row["records"], "seconds": row["seconds"], "cpu_s": row["cpu_s"],
           "cpu_per_100k": round(row["cpu_s"] * 100_000 / row["records"], 2), "peak_mb": row["peak_mb"],
           "engine_at_start_mb": row["engine_at_start_mb"],
           "cpu_split_per_100k": {kind: round(used * 100_000 / row["records"], 2)
                                  for kind, used in row["cpu_split"].items()}}
    return _arrived(row, counter, before, 2 * records, "ours")


def _arrived(row: dict, counter: PubSubCounter, before: int, expected: int, who: str) -> dict:
    """The row with what the endpoint counted in it (warm-up and row): fewer than sent is a failed row, not a fast
    one."""
    arrived = counter.stats()["published"]["messages"] - before
    if arrived < expected:
        raise RuntimeError(f"{who}: the counting endpoint got {arrived:,} messages of the {expected:,} sent")
    return {**row, "arrived": arrived}


def render(results: dict) -> str:
    ours, java = rounds_summary(results["ours"]), rounds_summary(results["java"])
    peak_mb = {name: statistics.median(r["peak_mb"] for r in results[name]) for name in ("ours", "java")}
    ratio = ours["rate_median"] / java["rate_median"]
    cpu_ratio = ours["cpu_median"] / java["cpu_median"]
    lines = [f"Measured {results['date']} on {results['cores']} cores: the Cloud Pub/Sub sink, {results['records']:,} "
             f"records of {results['size']:,} B per row, {PARTITIONS} partitions, seed defaults, {results['rounds']} "
             "rounds with the order alternating, into the counting Pub/Sub endpoint. Java: the 1.3.3 connector, "
             "tasks.max=2, on a warm worker; ours: one micro-batch on the warm Spark Connect engine. Medians "
             "(min-max). CPU counts the Java worker's JVM, and for ours the run process and the Spark Connect server.",
             "",
             "| | records/s | CPU s per 100k | peak MB |",
             "| --- | --- | --- | --- |"]
    for name, key, s in (("ours", "ours", ours), ("Java", "java", java)):
        lines.append(f"| {name} | {s['rate_median']:,.0f} ({s['rate_min']:,.0f}-{s['rate_max']:,.0f}) | "
                     f"{s['cpu_median']:.2f} ({s['cpu_min']:.2f}-{s['cpu_max']:.2f}) | {peak_mb[key]:,.0f} |")
    lines.append(f"| the endpoint's limit (a Go client publishing as fast as it answers) | "
                 f"{results['endpoint_limit']:,} | | |")
    lines += ["", f"Ours ÷ Java: **{ratio:.2f}x** the records/s (target 2x) at **{cpu_ratio:.2f}x** the CPU per "
              "record (target at most 0.5x)."]
    splits = [r["cpu_split_per_100k"] for r in results["ours"] if "cpu_split_per_100k" in r]
    if splits:
        kinds = sorted({kind for split in splits for kind in split})
        lines.append("Where ours' CPU goes (CPU s per 100k, medians): " + ", ".join(
            f"{kind} {statistics.median(split.get(kind, 0.0) for split in splits):.2f}" for kind in kinds) + ".")
    if spreads_overlap(ours, java):
        lines.append("The two spreads overlap: the gap between the medians is within this machine's noise.")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = rounds_arguments(__doc__).parse_args()
    console = Console(stderr=True)
    results = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "records": args.records,
               "size": args.size, "rounds": args.rounds}
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    with bench_stack(), running_counter() as counter:
        os.environ["PUBSUB_EMULATOR_HOST"] = counter.endpoint  # ours, and the Java worker's TLS front, point at it
        admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
        console.print(f"filling two topics with {args.records:,} records of {args.size:,} B for the Java rows ...")
        # Every Java connector is a new consumer group reading from the earliest offset: the rounds share them.
        topic, warm_up = (kafka_topic(unique_name(f"java-{kind}"), PARTITIONS, args.records, args.size)
                          for kind in ("row", "warm-up"))
        limit = flood(counter, args.records, args.size)
        results["endpoint_limit"] = round(limit["messages"] / limit["seconds"])
        console.print(f"the endpoint's own limit (a Go client's floor of it): {results['endpoint_limit']:,}/s")
        results |= alternating_rounds(args.rounds, {
            "java": lambda round_no: java_row(counter, admin, topic, warm_up, args.records, round_no),
            "ours": lambda round_no: our_row(counter, args.records, args.size)}, console.print)
    OUT.write_text(json.dumps(results, indent=1))
    Console().print(Markdown(render(results)))


if __name__ == "__main__":
    main()
