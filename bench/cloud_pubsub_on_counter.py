"""The Cloud Pub/Sub sink or source beside the Java connector with no emulator between, in rounds (about 11 minutes
for the sink on 2 cores):

    python -m bench.cloud_pubsub_on_counter [--connector sink|source] [--records 3000000] [--size 1024] [--rounds 3]

Both point at the counting Pub/Sub endpoint (bench.pubsub_counter), which keeps nothing: it answers Publish and
counts, and serves a subscription as many generated messages as it was given. So neither side meets pstest's
ceilings (its publish path near 40,000 messages/s, its Pull scanning the whole backlog). Each round measures, one
after the other on one fresh stack, the released Java connector (1.3.3, tasks.max=2, seed defaults) on a warm Kafka
Connect worker (bench.java_reference, through its TLS front) and ours at seed defaults in one micro-batch on the warm
Spark Connect engine (bench.throughput, after its untimed warm-up batch); the order alternates from round to round.
Every row moves `--records` records (20 s or more of steady state at 1 KiB).
- sink: Kafka -> Pub/Sub; the endpoint's count must show every row arrived. A row of the endpoint's own limit comes
  first: a Go client publishing to it as fast as it answers. Ours is measured twice per round: one micro-batch, and
  always on (a continuous run of its own draining a topic of `--records`).
- source: Pub/Sub -> Kafka, each row from a subscription of its own preloaded with `--records` messages; the Java row
  is first to last arrival in a LogAppendTime topic, ours the batch (plan to last write committed).
Prints medians with min-max and the ratio of the medians, says when the spreads overlap, and writes
bench/cloud_pubsub_on_counter_<connector>.json (`_<size>b` before `.json` for a size other than 1024).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from bench.common import (
    BENCH_STACK_HOME, alternating_rounds, bench_stack, rounds_arguments, rounds_summary, short_rows_line, spreads_overlap,
    write_results,
)
from bench.comparisons import write_table
from bench.continuous import continuous_run
from bench.data import kafka_topic, pubsub_topic, unique_name
from bench.java_reference import java_reference
from bench.process_memory import PeakMemory, TreeCpu
from bench.throughput import STRING_KEYS
from bench.pubsub_counter import PubSubCounter, flood, running_counter

HERE = Path(__file__).resolve().parent
PARTITIONS = 4
CONNECTORS = {"sink": "CloudPubSubSinkConnector", "source": "CloudPubSubSourceConnector"}
TARGET = "target for both: 2x at at most 0.5x the CPU per record"


def java_sink_row(counter: PubSubCounter, admin, topic: str, warm_up_topic: str, records: int, round_no: int) -> dict:
    """The warm Java sink moving `topic` (its warm-up connector moves `warm_up_topic` first, in the same JVM)."""
    before = counter.stats()["published"]["messages"]
    with java_reference(_java_folder(round_no)) as reference:
        destination, _ = pubsub_topic(unique_name("java-sink"), subscribe=False)
        row = reference.sink(admin, topic, destination.rsplit("/", 1)[-1], records, tasks_max=2,
                             warm_up_topic=warm_up_topic)
    return _arrived(row, counter, before, 2 * records, "the Java connector")


def java_source_row(counter: PubSubCounter, admin, records: int, size: int, round_no: int) -> dict:
    """The warm Java source: its warm-up connector moves a preloaded subscription first, in the same JVM, then the
    row's connector another, each into a LogAppendTime topic of its own."""
    (row_subscription, row_topic), warm_up = (_preloaded(counter, admin, f"java-{kind}", records, size)
                                              for kind in ("row", "warm-up"))
    with java_reference(_java_folder(round_no)) as reference:
        return reference.source(admin, row_subscription, row_topic, records, tasks_max=2, warm_up=warm_up)


def _preloaded(counter: PubSubCounter, admin, prefix: str, records: int, size: int) -> tuple[str, str]:
    name = unique_name(prefix)
    subscription = f"projects/bench/subscriptions/{name}"
    counter.preload(subscription, records, size)
    admin.create_topic(name, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    return subscription, name


def _java_folder(round_no: int) -> Path:
    folder = BENCH_STACK_HOME / f"java-reference-{round_no}"
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def our_row(connector: str, counter: PubSubCounter, records: int, size: int) -> dict:
    """Ours at seed defaults on the warm Spark Connect engine, after its warm-up batch (a sink's of as many records)."""
    before = counter.stats()["published"]["messages"]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.throughput", "--engine", "connect", "--sizes", str(size),
                        # the source reads --source-records; its Kafka topic of --records is then left nearly empty
                        "--records", str(records if connector == "sink" else 1), "--source-records", str(records),
                        "--only", CONNECTORS[connector], "--settings", "seed defaults",
                        "--counter-stats-url", counter.stats_url, "--out", out.name], check=True)
        (row,) = json.loads(Path(out.name).read_text())["rows"]
    if row["records"] < records:
        raise RuntimeError(f"ours moved {row['records']:,} records of the {records:,} asked for")
    row = {"records": row["records"], "seconds": row["seconds"], "cpu_s": row["cpu_s"],
           "cpu_per_100k": round(row["cpu_s"] * 100_000 / row["records"], 2), "peak_mb": row["peak_mb"],
           "engine_at_start_mb": row["engine_at_start_mb"],
           "cpu_split_per_100k": {kind: round(used * 100_000 / row["records"], 2)
                                  for kind, used in row["cpu_split"].items()}}
    return _arrived(row, counter, before, 2 * records, "ours") if connector == "sink" else row


def our_always_on_row(counter: PubSubCounter, remote: str, engine_pid: int, records: int, size: int) -> dict:
    """Ours always on (a continuous run of its own, `dagster job execute` of the bridge's job) at seed defaults with
    tasks.max=2 (the Java row's) on the warm Spark Connect engine, draining a topic filled with `records` records:
    from the first message the endpoint counts to the last (the Java row counts from its first partition assignment,
    a moment before its first publish). CPU: the run's process tree and the Spark Connect server over that span."""
    topic = kafka_topic(unique_name("ours-always-on"), PARTITIONS, records, size)
    destination, _ = pubsub_topic(unique_name("ours-always-on"), subscribe=False)
    entry = {"name": unique_name("always_on_sink").replace("-", "_"), "connector": CONNECTORS["sink"],
             "config": {"topics": topic, "cps.project": "bench", "cps.topic": destination.rsplit("/", 1)[-1],
                        "tasks.max": "2", **STRING_KEYS}}  # as many stream tasks as the Java row has
    before = counter.stats()["published"]["messages"]
    with continuous_run(entry, remote) as run, PeakMemory(also=(engine_pid,), root=run.pid) as memory:
        deadline = time.monotonic() + 120
        while (first := counter.stats()["published"]["messages"] - before) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("ours always on: nothing reached the counting endpoint within 120 s")
            time.sleep(0.02)
        started = time.monotonic()
        with TreeCpu(run.pid, engine_pid) as cpu:
            deadline = started + 600
            while (arrived := counter.stats()["published"]["messages"] - before) < records:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ours always on: {arrived:,} of {records:,} arrived within 600 s")
                time.sleep(0.02)
            seconds, cpu_s = time.monotonic() - started, cpu.seconds()
    moved = records - first
    return {"records": moved, "seconds": round(seconds, 3), "cpu_s": round(cpu_s, 2),
            "cpu_per_100k": round(cpu_s * 100_000 / moved, 2), "peak_mb": round(memory.peak / 1e6),
            "arrived": arrived}


def _arrived(row: dict, counter: PubSubCounter, before: int, expected: int, who: str) -> dict:
    """The row with what the endpoint counted in it (warm-up and row): fewer than sent is a failed row, not a fast
    one."""
    arrived = counter.stats()["published"]["messages"] - before
    if arrived < expected:
        raise RuntimeError(f"{who}: the counting endpoint got {arrived:,} messages of the {expected:,} sent")
    return {**row, "arrived": arrived}


def render(results: dict) -> str:
    ours, java = rounds_summary(results["ours"]), rounds_summary(results["java"])
    always_on = rounds_summary(results["ours_always_on"]) if results.get("ours_always_on") else None
    peak_mb = {name: statistics.median(r["peak_mb"] for r in results[name])
               for name in ("ours", "java", "ours_always_on") if results.get(name)}
    ratio = ours["rate_median"] / java["rate_median"]
    cpu_ratio = ours["cpu_median"] / java["cpu_median"]
    connector = results.get("connector", "sink")
    lines = [f"Measured {results['date']} on {results['cores']} cores: the Cloud Pub/Sub {connector}, "
             f"{results['records']:,} records of {results['size']:,} B per row, {PARTITIONS} partitions, seed "
             f"defaults, {results['rounds']} rounds with the order alternating, on the counting Pub/Sub endpoint. "
             "Java: the 1.3.3 connector, tasks.max=2, on a warm worker; ours: one micro-batch on the warm Spark "
             "Connect engine" + (", and always on (a continuous run of its own draining the row's backlog, from the "
                                 "first message counted to the last)" if always_on else "") +
             ". Medians (min-max). CPU counts the Java worker's JVM, and for ours the run's processes and the Spark "
             "Connect server.",
             "",
             "| | records/s | CPU s per 100k | peak MB |",
             "| --- | --- | --- | --- |"]
    shown = [("ours", "ours", ours)] + ([("ours, always on", "ours_always_on", always_on)] if always_on else [])
    for name, key, s in (*shown, ("Java", "java", java)):
        lines.append(f"| {name} | {s['rate_median']:,.0f} ({s['rate_min']:,.0f}-{s['rate_max']:,.0f}) | "
                     f"{s['cpu_median']:.2f} ({s['cpu_min']:.2f}-{s['cpu_max']:.2f}) | {peak_mb[key]:,.0f} |")
    if "endpoint_limit" in results:
        lines.append(f"| the endpoint's limit (a Go client publishing as fast as it answers) | "
                     f"{results['endpoint_limit']:,} | | |")
    lines += ["", f"Ours ÷ Java: **{ratio:.2f}x** the records/s at **{cpu_ratio:.2f}x** the CPU per record "
              f"({TARGET})."]
    if always_on:
        lines.append(f"Always on ÷ Java: **{always_on['rate_median'] / java['rate_median']:.2f}x** the records/s at "
                     f"**{always_on['cpu_median'] / java['cpu_median']:.2f}x** the CPU per record.")
    splits = [r["cpu_split_per_100k"] for r in results["ours"] if "cpu_split_per_100k" in r]
    if splits:
        kinds = sorted({kind for split in splits for kind in split})
        lines.append("Where ours' CPU goes (CPU s per 100k, medians): " + ", ".join(
            f"{kind} {statistics.median(split.get(kind, 0.0) for split in splits):.2f}" for kind in kinds) + ".")
    if spreads_overlap(ours, java):
        lines.append("The two spreads overlap: the gap between the medians is within this machine's noise.")
    short = short_rows_line({name: results[key] for name, key in (
        ("ours", "ours"), ("ours always on", "ours_always_on"), ("Java", "java")) if results.get(key)})
    if short:
        lines.append(short)
    return "\n".join(lines) + "\n"


def main() -> None:
    # 3,000,000: at 1 KiB and about 150,000 records/s a row of a million was 7 s, short of 20 s of steady state.
    parser = rounds_arguments(__doc__, records=3_000_000)
    parser.add_argument("--connector", choices=sorted(CONNECTORS), default="sink")
    args = parser.parse_args()
    console = Console(stderr=True)
    results = {"connector": args.connector,
               "records": args.records, "size": args.size, "rounds": args.rounds}
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    with bench_stack() as stack, running_counter() as counter:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        engine_pid = {server.name: server.pid for server in stack.status()}["spark"]
        os.environ["PUBSUB_EMULATOR_HOST"] = counter.endpoint  # ours, and the Java worker's TLS front, point at it
        admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
        if args.connector == "sink":
            console.print(f"filling two topics with {args.records:,} records of {args.size:,} B for the Java rows ...")
            # Every Java connector is a new consumer group reading from the earliest offset: the rounds share them.
            topic, warm_up = (kafka_topic(unique_name(f"java-{kind}"), PARTITIONS, args.records, args.size)
                              for kind in ("row", "warm-up"))
            limit = flood(counter, args.records, args.size)
            results["endpoint_limit"] = round(limit["messages"] / limit["seconds"])
            console.print(f"the endpoint's own limit (a Go client's floor of it): {results['endpoint_limit']:,}/s")

        def java(round_no: int) -> dict:
            if args.connector == "sink":
                return java_sink_row(counter, admin, topic, warm_up, args.records, round_no)
            return java_source_row(counter, admin, args.records, args.size, round_no)

        sides = {"java": java, "ours": lambda round_no: our_row(args.connector, counter, args.records, args.size)}
        if args.connector == "sink":
            sides["ours_always_on"] = lambda round_no: our_always_on_row(counter, remote, engine_pid, args.records,
                                                                         args.size)
        results |= alternating_rounds(args.rounds, sides, console.print)
    sized = "" if args.size == 1024 else f"_{args.size}b"
    path = HERE / f"cloud_pubsub_on_counter_{args.connector}{sized}.json"
    write_results(path, results)
    write_table()  # the comparisons the docs show
    Console().print(Markdown(render(json.loads(path.read_text()))))


if __name__ == "__main__":
    main()
