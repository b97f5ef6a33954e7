"""Sustained throughput of an always-on Kafka -> Cloud Pub/Sub bridge: the highest rate it keeps for `seconds`
with its lag not growing, ours (a `mode: continuous` bridge run as users run it, seed defaults) and the Java
connector's (seed defaults, tasks.max=2, in a Connect worker), side by side in one run on one stack.

Each rate of each side gets a fresh pstest, a 4-partition topic, the bridge started anew and a subscriber that pulls
and acks everything (recording pull time - send time per record). After WARM_UP_RECORDS, a producer process writes
records at the rate for `seconds` while the backlog (sent - arrived) is sampled every second; rates go up by `step`
from `start`. A rate is kept when every record arrived within DRAIN_SECONDS of the last send and the backlog of the
last third of the run is not, at its median, more than `GROWTH_ALLOWED_S` seconds of records above the median of the
second third's (a bridge that keeps up has a flat backlog; one that does not, a backlog growing by the shortfall
every second). The first rate not kept ends that side. Pub/Sub delivers at least once, so records that come twice
are counted apart; `not_arrived` counts what had not arrived DRAIN_SECONDS after the last send (lost, or still
queued: this bench does not wait to tell), and `subscriber_errors` the measuring subscriber's failed pulls and
acks (tried again), a sign that the harness, not the bridge, was the limit.

    python -m bench.sustained [--seconds 60] [--start 2000] [--step 1.5] [--max 60000] [--only ours|java]
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import statistics
import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Callable, Iterator

from bench.common import bench_stack, fresh_pubsub, write_results
from bench.continuous import (PARTITIONS, PubSubArrivals, continuous_run, java_cloud_sink_worker, produce_steady)
from bench.data import PROJECT, kafka_topic, pubsub_topic, unique_name
from bench.process_memory import TreeCpu
from local_stack.paths import PROJECT_ROOT

DRAIN_SECONDS = 30
GROWTH_ALLOWED_S = 0.5


def _produce(topic: str, rate: float, seconds: float, started, sent) -> None:
    """In a process of its own: the measuring subscriber's pulls would otherwise share the producer's GIL."""
    started.value = time.time()
    sent.value = produce_steady(topic, rate, seconds)


def one_rate(topic: str, arrivals: PubSubArrivals, rate: float, seconds: float, cpu_pids: list[int]) -> dict:
    """Records at `rate` for `seconds` through the running bridge; whether it kept up, and how."""
    spawn = multiprocessing.get_context("spawn")  # the parent holds gRPC threads: no fork
    started, sent = spawn.Value("d", 0.0), spawn.Value("q", -1)
    arrived_before, errors_before = len(arrivals.latencies), len(arrivals.errors)
    with TreeCpu(*cpu_pids) as cpu:
        producer = spawn.Process(target=_produce, args=(topic, rate, seconds, started, sent), daemon=True)
        producer.start()
        backlog: list[tuple[float, float]] = []  # (seconds since the first send, records sent - arrived)
        while producer.is_alive():
            time.sleep(1.0)
            if started.value:
                elapsed = min(time.time() - started.value, seconds)
                backlog.append((elapsed, rate * elapsed - (len(arrivals.latencies) - arrived_before)))
        producer.join()
        if sent.value < 0:
            raise RuntimeError("the producer process failed (see its traceback above)")
        deadline = time.monotonic() + DRAIN_SECONDS
        while len(arrivals.latencies) - arrived_before < sent.value and time.monotonic() < deadline:
            time.sleep(0.2)
        drained_s = round(time.time() - started.value - seconds, 1)
        cpu_s = cpu.seconds()
    latencies = arrivals.latencies[arrived_before:]
    distinct = len(set(arrivals.values[arrived_before:]))
    second = [b for t, b in backlog if seconds / 3 <= t < 2 * seconds / 3]
    last = [b for t, b in backlog if t >= 2 * seconds / 3]
    growth_s = (statistics.median(last) - statistics.median(second)) / rate if second and last else float("inf")
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {"rate_per_s": rate, "sent": sent.value, "arrived": len(latencies),
            "not_arrived": max(0, sent.value - distinct), "subscriber_errors": len(arrivals.errors) - errors_before,
            "duplicated": len(latencies) - distinct, "backlog_growth_s": round(growth_s, 2),
            "drained_after_s": drained_s, "p50_s": round(statistics.median(latencies), 3) if latencies else None,
            "p99_s": round(cuts[98], 3), "cpu_s_per_100k": round(cpu_s / max(sent.value, 1) * 100_000, 2),
            "kept": distinct >= sent.value and growth_s <= GROWTH_ALLOWED_S}


def search(bridge: Callable[[str], AbstractContextManager], rates: list[float], seconds: float,
           log: Callable[[str], None]) -> dict:
    """Rates in order until one is not kept; the highest kept and every step. Each rate is a row of its own: a fresh
    emulator, topic, subscription and bridge, warmed up. pstest keeps every message ever published and its Pull
    scans a subscription's whole backlog, so a rate measured after others on one emulator ran against a slower
    server than the first (measured: a fresh pstest took 30,375/s through ours, one that had taken the rates
    below did not)."""
    steps = []
    for rate in rates:
        fresh_pubsub()
        topic = kafka_topic(unique_name("sustained"), PARTITIONS)
        _, subscription = pubsub_topic(topic)
        arrivals = PubSubArrivals(subscription)
        arrivals.start()
        try:
            with bridge(topic) as cpu_pids:
                arrivals.warm_up(topic)
                step = one_rate(topic, arrivals, rate, seconds, cpu_pids)
        finally:
            arrivals.halt.set()
            arrivals.join(15)
        log(f"  {rate:,.0f}/s: {json.dumps(step)}")
        steps.append(step)
        if not step["kept"]:
            break
    kept = [s for s in steps if s["kept"]]
    return {"highest_kept_per_s": kept[-1]["rate_per_s"] if kept else None, "steps": steps}


@contextmanager
def _ours(remote: str, engine_pid: int, stream_tasks: int, topic: str) -> Iterator[list[int]]:
    """Our bridge on `topic`; yields the processes whose CPU it costs (the run's tree and the engine)."""
    entry = {"name": "sustained_cloud_sink", "connector": "CloudPubSubSinkConnector",
             "batch": {"initial_offsets": "latest"}, "continuous": {"stream_tasks": stream_tasks},
             "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic,
                        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}
    with continuous_run(entry, remote) as run:
        yield [run.pid, engine_pid]


@contextmanager
def _java(topic: str) -> Iterator[list[int]]:
    with java_cloud_sink_worker(topic) as worker:
        yield [worker.pid]


def measure_sustained(stack, rates: list[float], seconds: float, only: str | None = None, stream_tasks: int = 1,
                      log: Callable[[str], None] = print) -> dict:
    remote = stack.env()["BRIDGE_SPARK_REMOTE"]
    engine_pid = {s.name: s.pid for s in stack.status()}["spark"]
    results = {"seconds": seconds, "rates": rates, "growth_allowed_s": GROWTH_ALLOWED_S, "stream_tasks": stream_tasks}
    if only in (None, "java"):
        log("sustained: Java 1.3.3 Cloud Pub/Sub sink (tasks.max=2) ...")
        results["java"] = search(_java, rates, seconds, log)
    if only in (None, "ours"):
        log("sustained: our continuous Cloud Pub/Sub sink ...")
        results["ours"] = search(functools.partial(_ours, remote, engine_pid, stream_tasks), rates, seconds, log)
    if results.get("java", {}).get("highest_kept_per_s") and results.get("ours", {}).get("highest_kept_per_s"):
        results["ours_x_java"] = round(results["ours"]["highest_kept_per_s"] / results["java"]["highest_kept_per_s"],
                                       2)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--start", type=float, default=2000)
    parser.add_argument("--step", type=float, default=1.5)
    parser.add_argument("--max", type=float, default=60000)
    parser.add_argument("--only", choices=["ours", "java"])
    parser.add_argument("--stream-tasks", type=int, default=1, help="ours: continuous.stream_tasks (Java: tasks.max=2)")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "sustained.json"))
    args = parser.parse_args()
    rates, rate = [], args.start
    while rate <= args.max:
        rates.append(round(rate))
        rate *= args.step
    with bench_stack() as stack:
        results = measure_sustained(stack, rates, args.seconds, args.only, args.stream_tasks)
    write_results(Path(args.out), results)
    print(json.dumps(results, indent=1))



def render(results: dict) -> str:
    """Each rate tried, for each side: kept or not, its latency and CPU; and the highest rate each side kept."""
    sides = [side for side in ("ours", "java") if results.get(side)]
    lines = [f"{results['seconds']} s at each rate, 4 partitions; a rate is kept when every record arrived and the "
             f"backlog did not grow by more than {results['growth_allowed_s']} s of records.", "",
             "| rate (records/s) | " + " | ".join(f"{side}: kept, p50, p99, CPU s per 100k" for side in sides) + " |",
             "| --- | " + " | ".join("---" for _ in sides) + " |"]
    by_rate = {side: {step["rate_per_s"]: step for step in results[side]["steps"]} for side in sides}
    for rate in results["rates"]:
        cells = []
        for side in sides:
            step = by_rate[side].get(rate)
            cells.append("–" if step is None else
                         f"{'kept' if step['kept'] else '**not kept**'}, {step['p50_s']:.3f} s, {step['p99_s']:.3f} s, "
                         f"{step['cpu_s_per_100k']:.2f}")
        if any(cell != "–" for cell in cells):
            lines.append(f"| {rate:,} | " + " | ".join(cells) + " |")
    lines += ["", "Highest rate kept: " + ", ".join(f"{side} {results[side]['highest_kept_per_s']:,}/s" for side in sides)
              + (f" ({results['ours_x_java']:.2f}x)" if results.get("ours_x_java") else "") + "."]
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
