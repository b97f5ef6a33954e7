"""A connector against the released Java one on a warm worker, side by side in one run (about 6 minutes on 2 cores):

    python -m bench.versus_java [--records 100000] [--sizes 100,1024] [--connector cloud-sink|cloud-source|lite]

On one fresh stack, for each record size: the released Java connector (1.3.3, tasks.max=2, seed defaults) on a
warm Kafka Connect worker (bench.java_reference), then ours at seed defaults in one micro-batch on the classic
engine and on the warm Spark Connect engine (bench.throughput, after its untimed warm-up batch). Prints one table
of ratios (throughput, CPU per record, peak memory) and writes bench/versus_java.json (`lite`:
bench/versus_java_lite.json).
- cloud-sink: the Cloud Pub/Sub sink. `python -m bench` measures the same rows among all the others.
- cloud-source: the Cloud Pub/Sub source, against the warm Java source's better of tasks.max 1 and 2, as the full
  bench holds it. Give it --records 10000: pstest's Pull scans the whole backlog on every call, so larger
  backlogs measure the emulator (the full bench's source rows are 10,000 messages for the same reason).
- lite: the Pub/Sub Lite sink (Kafka -> a 4-partition Lite topic) and then the Lite source (that topic's
  subscription -> Kafka). The Java Lite connectors reach the stack's Lite server through bench.tls_front as the
  location's regional endpoint; the Java source reads what the Java sink published, ours what ours did.
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

from bench.common import BENCH_STACK_HOME, bench_stack, fresh_pubsub, write_results
from bench.data import filled_subscription, kafka_topic, pubsub_topic, unique_name
from bench.java_reference import java_reference

HERE = Path(__file__).resolve().parent
# --connector: (our connectors measured, the results file)
CONNECTORS = {"cloud-sink": (("CloudPubSubSinkConnector",), HERE / "versus_java.json"),
              "cloud-source": (("CloudPubSubSourceConnector",), HERE / "versus_java_source.json"),
              "lite": (("PubSubLiteSinkConnector", "PubSubLiteSourceConnector"), HERE / "versus_java_lite.json")}


def _java_rows(connector: str, size: int, records: int) -> dict[str, dict]:
    """The Java rows of `connector` (cloud-sink, lite) for one size, by our connector's name."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
    folder = BENCH_STACK_HOME / "java-reference"
    shutil.rmtree(folder, ignore_errors=True)
    with java_reference(folder) as reference:
        if connector == "cloud-source":
            return {"CloudPubSubSourceConnector": _java_source(reference, admin, size, records)}
        topic = kafka_topic(unique_name(f"java-{size}"), 4, records, size)
        warm_up = kafka_topic(unique_name(f"java-warm-up-{size}"), 4, records, size)
        if connector == "cloud-sink":
            fresh_pubsub()
            destination, _ = pubsub_topic(unique_name("java-sink"), subscribe=False)
            return {"CloudPubSubSinkConnector": reference.sink(admin, topic, destination.rsplit("/", 1)[-1], records,
                                                               tasks_max=2, warm_up_topic=warm_up)}
        lite = reference.lite_rows(admin, topic, warm_up, records, size)
        return {"PubSubLiteSinkConnector": lite["lite_sink_2_warm"],
                "PubSubLiteSourceConnector": lite["lite_source_2_warm"]}


def _java_source(reference, admin, size: int, records: int) -> dict:
    """The warm Java source's better row of tasks.max 1 and 2."""
    rows = []
    for tasks in (1, 2):
        fresh_pubsub()
        subscription, name = filled_subscription(admin, "java-source", size, records)
        warm_up = filled_subscription(admin, "java-warm-up", size, records)
        rows.append(reference.source(admin, subscription, name, records, tasks_max=tasks, warm_up=warm_up))
    return max(rows, key=lambda row: row["records"] / row["seconds"])


def ours(connectors: tuple[str, ...], engine: str, sizes: str, records: int) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.throughput", "--engine", engine, "--records", str(records),
                        "--source-records", str(records), "--sizes", sizes, "--only", ",".join(connectors),
                        "--out", out.name], check=True)
        rows = json.loads(Path(out.name).read_text())["rows"]
    return [r for r in rows if r["settings"] == "seed defaults" and r["connector"] in connectors]


def render(results: dict) -> str:
    lines = [f"Measured {results['date']} on {results['cores']} cores, {results['records']:,} records per row, "
             "4 partitions, seed defaults; Java: the 1.3.3 connector, tasks.max=2 (the Cloud source: its better of "
             "1 and 2), on a warm worker. Peak MB on Connect counts the whole Spark Connect server; 'run's own' is "
             "that peak less what the server held when the row started (the run process and the server's growth).",
             "",
             "| connector | size | engine | ours records/s | Java records/s | × Java | ours CPU s per 100k "
             "| Java CPU s per 100k | CPU ÷ Java's | ours peak MB | run's own MB | Java peak MB | memory ÷ Java's "
             "| run's own ÷ Java's |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in results["ours"]:
        java = results["java"][str(row["size"])][row["connector"]]
        rate, java_rate = row["records"] / row["seconds"], java["records"] / java["seconds"]
        cpu, java_cpu = row["cpu_s"] * 100_000 / row["records"], java["cpu_per_100k"]
        own = row["peak_mb"] - row.get("engine_at_start_mb", 0)
        lines.append(f"| {row['connector']} | {row['size']} B | {row['engine']} | {rate:,.0f} | {java_rate:,.0f} | "
                     f"{rate / java_rate:.2f} | {cpu:.2f} | {java_cpu:.2f} | {cpu / java_cpu:.2f} | "
                     f"{row['peak_mb']:,} | {own:,} | {java['peak_mb']:,} | {row['peak_mb'] / java['peak_mb']:.2f} | "
                     f"{own / java['peak_mb']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--connector", choices=sorted(CONNECTORS), default="cloud-sink")
    args = parser.parse_args()
    connectors, out = CONNECTORS[args.connector]
    console = Console(stderr=True)
    results = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "records": args.records,
               "java": {}, "ours": []}
    with bench_stack():
        for size in [int(s) for s in args.sizes.split(",")]:
            console.print(f"the Java connector ({args.connector}) on a warm worker, {size} B ...")
            results["java"][str(size)] = _java_rows(args.connector, size, args.records)
        for engine in ("classic", "connect"):
            console.print(f"ours on the {engine} engine ...")
            results["ours"] += ours(connectors, engine, args.sizes, args.records)
    write_results(out, results)
    Console().print(Markdown(render(results)))


if __name__ == "__main__":
    main()
