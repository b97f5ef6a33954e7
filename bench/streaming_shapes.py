"""Which long-lived shape on Spark moves an always-on Kafka -> Cloud Pub/Sub bridge: ours (one long-running Spark
job whose tasks hold a consumer and a publisher, `mode: continuous`, run as users run it on the warm engine) or
Spark Structured Streaming (Spark's Kafka source and a Python `foreach` writer publishing to Pub/Sub, as a user of
Structured Streaming would write this bridge), in its micro-batch mode (`processingTime="0 seconds"`, one batch
after the other) and its real-time mode (Spark 4.1+, `realTime="5 seconds"`, the shortest batch Spark allows by
default: its long-running tasks stream records through a batch instead of ending with it). Side by side in one run
on one stack; the Java connector (seed defaults, tasks.max=2, warm) beside them with `--java`.

Each row: a fresh pstest, a 4-partition topic, WARM_UP_RECORDS moved first (not measured), then `rate` records a
second for `seconds`; send -> pull time at a subscriber (bench.continuous's harness), and the CPU of the row's
processes while records flow (ours: the run's process tree and the engine's; Structured Streaming: its driver JVM
and Python workers, in a process of their own; Java: the Connect worker), as % of one core.

The Structured Streaming rows run on this project's pyspark (4.3) in local mode with `local[4]`, one task per
partition; Spark's Kafka source is not in the pyspark wheel and Maven Central serves it up to 4.2.0 here, so
they load spark-sql-kafka 4.2.0 (local_stack.fetch.spark_kafka_jars). Their publisher batches as the Cloud sink's
seed defaults do (maxBufferSize 100 records, maxDelayThresholdMs 100 ms). They only measure the shape: no
positions in asset metadata, no lease, no error handling.

    python -m bench.streaming_shapes [--seconds 60] [--rate 1000] [--java]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.common import BENCH_STACK_HOME, bench_stack, fresh_pubsub, write_results
from bench.continuous import (PARTITIONS, PubSubArrivals, continuous_run, java_cloud_sink_worker, produce_steady,
                              summary)
from bench.data import PROJECT, kafka_topic, pubsub_topic, unique_name
from bench.process_memory import TreeCpu
from local_stack.paths import PROJECT_ROOT

STRUCTURED_TRIGGERS = {"micro-batch": {"processingTime": "0 seconds"}, "real-time": {"realTime": "5 seconds"}}


def measured(arrivals: PubSubArrivals, topic: str, rate: float, seconds: float, cpu_pids: list[int]) -> dict:
    """Warm-up, then `rate` records a second for `seconds`: latencies and the CPU of `cpu_pids`' trees meanwhile."""
    arrivals.warm_up(topic)
    with TreeCpu(*cpu_pids) as cpu:
        started = time.monotonic()
        sent = produce_steady(topic, rate, seconds)
        arrivals.wait_for(sent)
        busy = cpu.seconds()
    return summary(arrivals.latencies, sent) | {"busy_cpu_pct": round(100 * busy / (time.monotonic() - started), 1)}


def fresh_row(prefix: str) -> tuple[str, PubSubArrivals]:
    """A fresh pstest, a Kafka topic and a Pub/Sub topic of the same name, and a started subscriber on it."""
    fresh_pubsub()
    topic = kafka_topic(unique_name(prefix), PARTITIONS)
    _, subscription = pubsub_topic(topic)
    arrivals = PubSubArrivals(subscription)
    arrivals.start()
    return topic, arrivals


def ours(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    topic, arrivals = fresh_row("shape-ours")
    entry = {"name": "shape_ours", "connector": "CloudPubSubSinkConnector", "batch": {"initial_offsets": "latest"},
             "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic,
                        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}
    with continuous_run(entry, remote) as run:
        return measured(arrivals, topic, rate, seconds, [run.pid, engine_pid])


def structured(trigger: str, rate: float, seconds: float) -> dict:
    topic, arrivals = fresh_row("shape-ss")
    log = BENCH_STACK_HOME / f"structured-{trigger}.log"
    query = subprocess.Popen([sys.executable, "-m", "bench.structured_query", "--topic", topic,
                              "--trigger", json.dumps(STRUCTURED_TRIGGERS[trigger]),
                              "--checkpoint", str(BENCH_STACK_HOME / f"structured-{topic}")],
                             cwd=PROJECT_ROOT, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "QUERY STARTED" not in log.read_text(errors="replace"):
            if query.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Structured Streaming query did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        return measured(arrivals, topic, rate, seconds, [query.pid])
    finally:
        os.killpg(query.pid, signal.SIGTERM)
        try:
            query.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(query.pid, signal.SIGKILL)


def java(rate: float, seconds: float) -> dict:
    topic, arrivals = fresh_row("shape-java")
    with java_cloud_sink_worker(topic) as worker:
        return measured(arrivals, topic, rate, seconds, [worker.pid])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--java", action="store_true", help="the Java connector's row too")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "streaming_shapes.json"))
    args = parser.parse_args()
    from local_stack.fetch import spark_kafka_jars

    spark_kafka_jars()  # fetched before the stack starts, not inside a row
    results = {"command": " ".join(["python -m bench.streaming_shapes"] + sys.argv[1:]), "rate_per_s": args.rate,
               "seconds": args.seconds, "rows": {}}
    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        engine_pid = {s.name: s.pid for s in stack.status()}["spark"]
        print("ours: one long-running Spark job (mode: continuous) ...", flush=True)
        results["rows"]["ours"] = ours(remote, engine_pid, args.rate, args.seconds)
        for trigger in STRUCTURED_TRIGGERS:
            print(f"Structured Streaming, {trigger} ...", flush=True)
            results["rows"][f"structured_streaming_{trigger}"] = structured(trigger, args.rate, args.seconds)
        if args.java:
            print("Java connector 1.3.3, tasks.max=2 ...", flush=True)
            results["rows"]["java"] = java(args.rate, args.seconds)
    write_results(Path(args.out), results)
    print(json.dumps(results, indent=1))



def render(results: dict) -> str:
    """Each shape's send -> pull latency and its CPU while records flow."""
    lines = [f"{results['rate_per_s']:,} records/s for {results['seconds']:.0f} s, 4 partitions, one run.", "",
             "| shape | records | p50 | p99 | max | CPU while moving (% of a core) |", "| --- | --- | --- | --- | --- | --- |"]
    for name, r in results["rows"].items():
        lines.append(f"| {name.replace('_', ' ')} | {r['records']:,} | {r['p50_s']:.3f} s | {r['p99_s']:.3f} s | "
                     f"{r['max_s']:.3f} s | {r['busy_cpu_pct']} |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
