"""The benchmark suite, one command: `python -m bench` (about 20 minutes on 2 cores).

On one fresh local stack, for 100 B and 1 KiB records:
1. raw limits: each end of each bridge alone, as fast as a plain Python program drives it;
2. naive baselines: a one-message-at-a-time loop per direction;
3. every connector's micro-batch throughput and peak memory, at seed defaults and tuned settings,
   on the classic engine and on the warm Spark Connect engine (one process per engine, each connector's
   first batch there untimed and reported apart), with an Avro
   (Schema Registry) row of the Cloud Pub/Sub sink at 1 KiB held against its ByteArray row;
   peak memory of the Cloud Pub/Sub sink at three batch sizes, a fresh process each;
4. the reference: the released Java connector (1.3.3) in a Kafka Connect standalone worker on the same
   Kafka and pstest, sink (tasks.max=2) and source (tasks.max 1 and 2), with its CPU time and peak memory; and
   its Pub/Sub Lite sink and source (tasks.max=2, warm worker) against the local Lite server (bench.tls_front);
5. run overhead (command start to first record delivered) and end-to-end latency with the daemon
   starting runs from the sensor (p50/p95), on both engines.
Writes bench/results.json and bench/results.md (the tables the README shows) and prints them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from bench import latency, limits, naive
from bench.common import BENCH_STACK_HOME, bench_stack, fresh_pubsub
from bench.continuous import measure_continuous, render_continuous
from bench.java_reference import java_reference
from bench.data import (
    filled_subscription, kafka_topic, lite_topic, publish_lite, publish_pubsub, pubsub_topic, unique_name,
)

RESULTS = Path(__file__).resolve().parent
# Which raw limits bound each connector: (where it reads, where it writes).
PATHS = {
    "CloudPubSubSinkConnector": ("kafka_consume", "pubsub_publish"),
    "PubSubLiteSinkConnector": ("kafka_consume", "lite_publish"),
    "S3BlockGzipSinkConnector": ("kafka_consume", "s3_put"),
    "CloudPubSubSourceConnector": ("pubsub_pull", "kafka_produce"),
    "PubSubLiteSourceConnector": ("lite_subscribe", "kafka_produce"),
}
NAIVE = {"CloudPubSubSinkConnector": "kafka_to_pubsub", "PubSubLiteSinkConnector": "kafka_to_lite",
         "CloudPubSubSourceConnector": "pubsub_to_kafka", "PubSubLiteSourceConnector": "lite_to_kafka"}


def measure_limits(size: int, records: int, source_records: int) -> dict[str, float]:
    topic = kafka_topic(unique_name(f"limit-{size}"), 4, records, size)
    out = {"kafka_consume": limits.kafka_consume(topic, records),
           "kafka_produce": limits.kafka_produce(kafka_topic(unique_name("limit-produce"), 4), records, size)}
    fresh_pubsub()
    pubsub, _ = pubsub_topic(unique_name("limit"), subscribe=False)
    out["pubsub_publish"] = limits.pubsub_publish(pubsub, records, size)
    fresh_pubsub()
    pull_topic, pull_subscription = pubsub_topic(unique_name("limit-pull"))
    publish_pubsub(pull_topic, source_records, size)  # pstest's Pull is O(backlog): a smaller backlog
    out["pubsub_pull"] = limits.pubsub_pull(pull_subscription, source_records)
    lite, lite_subscription = lite_topic(unique_name("limit"), 4)
    out["lite_publish"] = limits.lite_publish(lite, records, size)
    out["lite_subscribe"] = limits.lite_subscribe(lite_subscription, records)
    out["s3_put"] = limits.s3_put(unique_name("limit"), records, size)
    return {k: round(v) for k, v in out.items()}


def measure_naive(size: int, records: int) -> dict[str, float]:
    topic = kafka_topic(unique_name(f"naive-{size}"), 4, records, size)
    fresh_pubsub()
    pubsub, _ = pubsub_topic(unique_name("naive"), subscribe=False)
    lite, _ = lite_topic(unique_name("naive"), 4)
    out = {"kafka_to_pubsub": naive.kafka_to_pubsub(topic, pubsub), "kafka_to_lite": naive.kafka_to_lite(topic, lite)}
    fresh_pubsub()
    source, source_subscription = pubsub_topic(unique_name("naive-src"))
    publish_pubsub(source, 5_000, size)
    out["pubsub_to_kafka"] = naive.pubsub_to_kafka(source_subscription, kafka_topic(unique_name("naive-back"), 4))
    lite_source, lite_subscription = lite_topic(unique_name("naive-src"), 4)
    publish_lite(lite_source, 5_000, size)
    out["lite_to_kafka"] = naive.lite_to_kafka(lite_subscription, kafka_topic(unique_name("naive-back"), 4))
    return {k: round(v, 1) for k, v in out.items()}


def measure_java(size: int, records: int, source_records: int) -> dict:
    """The Java connector's sink and source rows for one record size (bench.java_reference)."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
    out = {}
    folder = BENCH_STACK_HOME / "java-reference"
    shutil.rmtree(folder, ignore_errors=True)
    with java_reference(folder) as reference:
        topic = kafka_topic(unique_name(f"java-{size}"), 4, records, size)
        fresh_pubsub()
        destination, _ = pubsub_topic(unique_name("java-sink"), subscribe=False)
        out["sink_2"] = reference.sink(admin, topic, destination.rsplit("/", 1)[-1], records, tasks_max=2)
        # The same, on a worker that first moved as many records with a connector of its own (a warm JVM,
        # as our rows run on an engine that has moved batches before).
        fresh_pubsub()
        destination, _ = pubsub_topic(unique_name("java-sink"), subscribe=False)
        warm_up = kafka_topic(unique_name(f"java-warm-up-{size}"), 4, records, size)
        out["sink_2_warm"] = reference.sink(admin, topic, destination.rsplit("/", 1)[-1], records, tasks_max=2,
                                            warm_up_topic=warm_up)
        for tasks in (1, 2):
            for warm in (False, True):
                fresh_pubsub()
                subscription, name = filled_subscription(admin, "java-source", size, source_records)
                warm_up = filled_subscription(admin, "java-warm-up", size, source_records) if warm else None
                out[f"source_{tasks}{'_warm' if warm else ''}"] = reference.source(
                    admin, subscription, name, source_records, tasks_max=tasks, warm_up=warm_up)
        # The Lite connectors, warm only (tasks.max=2).
        warm_up = kafka_topic(unique_name(f"java-lite-warm-up-{size}"), 4, records, size)
        out.update(reference.lite_rows(admin, topic, warm_up, records, size))
    return out


def measure_throughput(engine: str, args) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.throughput", "--engine", engine, "--records", str(args.records),
                        "--source-records", str(args.source_records), "--sizes", args.sizes, "--out", out.name],
                       check=True)
        return json.loads(Path(out.name).read_text())


def measure_memory(sizes: tuple[int, ...]) -> list[dict]:
    """The Cloud Pub/Sub sink (1 KiB, tuned) at several batch sizes, each in a fresh process."""
    topic = kafka_topic(unique_name("memory"), 4, max(sizes), 1024)
    rows = []
    for batch in sizes:
        fresh_pubsub()
        done = subprocess.run([sys.executable, "-m", "bench.memory", "--topic", topic, "--records", str(batch)],
                              check=True, capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def render(results: dict) -> str:
    sizes = sorted(int(s) for s in results["limits"])
    lines = [f"Measured {results['date']} on {results['cores']} cores, {results['records']:,} records per "
             f"sink row ({results['source_records']:,} for the Cloud Pub/Sub source), Kafka and Lite 4 partitions, "
             "all servers on the same machine.", "",
             "### Raw limits (records/s, each end alone)", "",
             "| size | " + " | ".join(PATHS_LIMIT_NAMES.values()) + " |",
             "| --- |" + " --- |" * len(PATHS_LIMIT_NAMES)]
    for size in sizes:
        row = results["limits"][str(size)]
        lines.append(f"| {size} B | " + " | ".join(f"{row[k]:,}" for k in PATHS_LIMIT_NAMES) + " |")
    lines += ["", "### Naive loops (records/s, one message at a time)", "",
              "| size | Kafka→Pub/Sub | Kafka→Lite | Pub/Sub→Kafka | Lite→Kafka |", "| --- | --- | --- | --- | --- |"]
    for size in sizes:
        row = results["naive"][str(size)]
        lines.append(f"| {size} B | {row['kafka_to_pubsub']:,} | {row['kafka_to_lite']:,} | "
                     f"{row['pubsub_to_kafka']:,} | {row['lite_to_kafka']:,} |")
    lines += ["", "### The Java connector (1.3.3, Kafka Connect standalone worker, seed defaults)", "",
              "(worker: \"new\" is a worker started for the row; \"warm\" is a second connector added to a worker "
              "that has just moved as many records with a first one.)", "",
              "| connector | size | tasks.max | worker | records | steady seconds | records/s | CPU s per 100k records "
              "| peak MB |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for size in sizes:
        for key, connector, tasks in JAVA_ROWS:
            for worker, suffix in (("new", ""), ("warm", "_warm")):
                j = results["java"][str(size)].get(key + suffix)
                if j:
                    lines.append(f"| {short(connector)} | {size} B | {tasks} | {worker} | {j['records']:,} | "
                                 f"{j['seconds']:.2f} | {j['records'] / j['seconds']:,.0f} | {j['cpu_per_100k']:.1f} "
                                 f"| {j.get('peak_mb', '–')} |")
    lines += ["", "### Bridges: one micro-batch", "",
              "| connector | size | settings | engine | records | seconds | records/s | MB/s | peak memory (MB) "
              "| CPU s per 100k | × Java (new worker) | × Java (warm worker) | CPU ÷ warm Java's "
              "| memory ÷ warm Java's | run's own memory ÷ warm Java's | × raw limit | × naive |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for engine_result in results["throughput"]:
        for r in engine_result["rows"]:
            rate = r["records"] / r["seconds"]
            limit_row = results["limits"][str(r["size"])]
            bound = min(limit_row[k] for k in PATHS[r["connector"]])
            naive_rate = results["naive"][str(r["size"])].get(NAIVE.get(r["connector"], ""), 0)
            java, warm = java_row(results, r), java_row(results, r, warm=True)
            cpu = r["cpu_s"] * 100_000 / r["records"]

            def ratio(ours: float, theirs: float | None) -> str:
                return f"{ours / theirs:.2f}" if theirs else "n/a"

            lines.append(
                f"| {r['connector']} | {r['size']} B | {r['settings']} | {r['engine']} | {r['records']:,} | "
                f"{r['seconds']:.1f} | {rate:,.0f} | {rate * r['size'] / 1e6:.2f} | {r['peak_mb']:,.0f} | "
                f"{cpu:.1f} | {ratio(rate, java and java['records'] / java['seconds'])} | "
                f"{ratio(rate, warm and warm['records'] / warm['seconds'])} | "
                f"{ratio(cpu, warm and warm['cpu_per_100k'])} | {ratio(r['peak_mb'], warm and warm.get('peak_mb'))} | "
                f"{ratio(r['peak_mb'] - r.get('engine_at_start_mb', 0), warm and warm.get('peak_mb'))} | "
                f"{rate / bound:.2f} | {f'{rate / naive_rate:.0f}×' if naive_rate else 'n/a'} |")
    lines += ["", "Schema Registry: " + "; ".join(
        f"{a['engine']}: Avro {a['records'] / a['seconds']:,.0f} records/s = "
        f"{(a['records'] / a['seconds']) / (b['records'] / b['seconds']):.2f} × the ByteArray row "
        f"({b['records'] / b['seconds']:,.0f}/s), 1 KiB, seed defaults"
        for a, b in avro_pairs(results)) + "."]
    lines += ["", "First batch of each connector on each engine, before the rows and not in the table above "
              "(it loads the connector's code into the engine's Python workers and warms the engine): " + "; ".join(
        f"{t['engine']}: " + ", ".join(f"{short(b['connector'])} {b['settings']} {b['records']:,} in {b['seconds']} s"
                                       for b in t.get("first_batches", []))
        for t in results["throughput"]) + "."]
    lines += ["", "Session start before the rows: " + ", ".join(
        f"{t['engine']} {t['session_start_s']} s" for t in results["throughput"]) + ". Peak memory is the "
        "resident size of the benchmark's process tree (and, on Connect, the server's) during the row; "
        "a JVM keeps the heap it grew to, so later rows inherit earlier peaks. The run's own memory is that peak "
        "less what the Connect server held when the row started (on classic, the whole peak): the run's share of "
        "a server that many bridges share.", "",
        "### Memory against batch size (Cloud Pub/Sub sink, 1 KiB, tuned, classic engine, a fresh process each)",
        "", "| batch (records) | seconds | peak memory (MB) | JVM (MB) | Python (MB) |", "| --- | --- | --- | --- | --- |"]
    for m in results["memory"]:
        lines.append(f"| {m['records']:,} | {m['seconds']} | {m['peak_mb']:,} | {m['jvm_mb']:,} | {m['python_mb']:,} |")
    lines += ["",
        "### Run overhead and continuous latency (Cloud Pub/Sub sink)", "",
        "| engine | command start → first record | command start → end | continuous p50 | p95 | max | records |",
        "| --- | --- | --- | --- | --- | --- | --- |"]
    for engine in ("classic", "connect"):
        o, c = results["overhead"][engine], results["latency"][engine]
        lines.append(f"| {engine} | {o['first_record_s']} s | {o['run_s']} s | {c['p50_s']} s | {c['p95_s']} s | "
                     f"{c['max_s']} s | {c['records']} |")
    if results.get("continuous"):
        c = results["continuous"]
        lines += ["", f"### Continuous mode ({c['rate_per_s']:,.0f} records/s for {c['seconds']:.0f} s, "
                      f"4 partitions, warm engine)", "", *render_continuous(c)]
    return "\n".join(lines) + "\n"


def avro_pairs(results: dict) -> list[tuple[dict, dict]]:
    """(Avro row, ByteArray seed row of the same size and engine) of each engine."""
    from bench.throughput import AVRO_LABEL

    pairs = []
    for engine_result in results["throughput"]:
        rows = engine_result["rows"]
        for avro in (r for r in rows if r["settings"] == AVRO_LABEL):
            plain = next(r for r in rows if r["connector"] == avro["connector"] and r["size"] == avro["size"]
                         and r["settings"] == "seed defaults")
            pairs.append((avro, plain))
    return pairs


def short(connector: str) -> str:
    return connector.removesuffix("Connector")


# The Java rows: (key in results["java"][size], our connector it is held against, tasks.max).
JAVA_ROWS = (("sink_2", "CloudPubSubSinkConnector", 2), ("source_1", "CloudPubSubSourceConnector", 1),
             ("source_2", "CloudPubSubSourceConnector", 2), ("lite_sink_2", "PubSubLiteSinkConnector", 2),
             ("lite_source_2", "PubSubLiteSourceConnector", 2))


def java_row(results: dict, row: dict, warm: bool = False) -> dict | None:
    """The Java row a row of ours is held against: the sinks at tasks.max=2, the Cloud source at its best of 1 and
    2, the Lite source at 2; on a new worker, or on a warm one (the Lite rows: warm only)."""
    java = results["java"][str(row["size"])]
    suffix = "_warm" if warm else ""
    rows = [java[key + suffix] for key, connector, _ in JAVA_ROWS
            if connector == row["connector"] and key + suffix in java]
    return max(rows, key=lambda j: j["records"] / j["seconds"]) if rows else None


PATHS_LIMIT_NAMES = {"kafka_consume": "Kafka consume (librdkafka)", "kafka_produce": "Kafka produce (idempotent)",
                     "pubsub_publish": "Pub/Sub publish (best batching)", "pubsub_pull": "Pub/Sub pull (1,000/call)",
                     "lite_publish": "Lite publish (library)", "lite_subscribe": "Lite subscribe (library)",
                     "s3_put": "S3 put (8 MiB objects)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--source-records", type=int, default=10_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--latency-seconds", type=float, default=90)
    parser.add_argument("--continuous-seconds", type=float, default=120)
    args = parser.parse_args()
    console = Console(stderr=True)
    results = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "records": args.records,
               "source_records": args.source_records, "limits": {}, "naive": {}, "throughput": [],
               "java": {}, "memory": [], "overhead": {}, "latency": {}}
    partial = RESULTS / "results.partial.json"  # what is measured so far, should a later stage fail

    def measured() -> None:
        partial.write_text(json.dumps(results, indent=1))

    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        for size in [int(s) for s in args.sizes.split(",")]:
            console.print(f"raw limits, {size} B ...")
            results["limits"][str(size)] = measure_limits(size, args.records, args.source_records)
            console.print(f"naive loops, {size} B ...")
            results["naive"][str(size)] = measure_naive(size, args.records)
            console.print(f"the Java connector, {size} B ...")
            results["java"][str(size)] = measure_java(size, args.records, args.source_records)
            measured()
        for engine in ("classic", "connect"):
            console.print(f"bridges on the {engine} engine ...")
            results["throughput"].append(measure_throughput(engine, args))
            measured()
        console.print("memory against batch size ...")
        results["memory"] = measure_memory((args.records // 10, args.records, args.records * 10))
        for engine in ("classic", "connect"):
            console.print(f"run overhead and continuous latency, {engine} engine ...")
            results["overhead"][engine] = latency.run_overhead(engine, remote)
            results["latency"][engine] = latency.continuous_latency(engine, remote, seconds=args.latency_seconds)
            measured()
        console.print("continuous mode ...")
        results["continuous"] = measure_continuous(stack, 1000, args.continuous_seconds, console.print)
    (RESULTS / "results.json").write_text(json.dumps(results, indent=1))
    partial.unlink(missing_ok=True)
    report = render(results)
    (RESULTS / "results.md").write_text(report)
    Console().print(Markdown(report))


if __name__ == "__main__":
    main()
