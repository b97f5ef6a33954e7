"""Many always-on bridges on one machine, run the way a user runs them: `dagster dev` on a bridges file of N Kafka ->
Pub/Sub bridges (Cloud Pub/Sub sink, seed defaults, each its own topic) as the bridges file's defaults have them,
always on in the host `default` (one run moves them all; `--own-runs` also measures a run per bridge, `--batch` the
same bridges in micro-batch mode, a run per batch), while every topic gets `rate` records a second. Reports the CPU
(% of one core) and the resident memory of our processes, split by kind (dagster dev's daemon, webserver, code server
and run workers; the Spark engine's JVM and its Python workers), steady and idle, the send -> Pub/Sub publish
time of every record (p50, p99) across the fleet, and how long until every bridge moved its first record, from
`dagster dev`'s start and from its (first) run's. The emulators are not counted. The same N topics through one Java
Kafka Connect worker (1.3.3, one connector per topic, tasks.max=1) beside it. Each fleet size runs `--rounds`
times, ours and Java's in turn (the order turned around every other round); a row shows the median of its rounds and
their min-max, and the ratios are of medians. Before the rounds, an untimed round of ours at the largest size warms
the stack (its Kafka broker's JIT, the Spark Connect server, the OS's file cache): without it, the first round, ours
on a broker just started, carried the bench's whole p99 tail.

    python -m bench.fleet [--bridges 1,10,30] [--rate 20] [--seconds 60] [--rounds 3] [--own-runs] [--batch]
    (a stack of its own, like python -m bench)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import yaml

from bench.common import (
    BENCH_STACK_HOME, alternating_rounds, bench_stack, fresh_pubsub, median_spread, ranges_overlap, write_results,
)
from bench.continuous import kafka_producer
from bench.data import PROJECT, kafka_topic, pubsub_topic, unique_name
from bench.process_memory import TreeCpu
from local_stack.child_signals import hear_sigint
from local_stack.paths import PROJECT_ROOT

SETTLE_S = 10  # after the last run started, before anything is measured
WINDOW_S = 30  # CPU is measured over this long, steady and idle
WARM_UP_S = 20  # of traffic in the untimed round that warms the stack
JAVA_SINK = "com.google.pubsub.kafka.sink.CloudPubSubSinkConnector"


def _kind(pid: int) -> str | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    text = b" ".join(argv)
    if b"java" in argv[0]:
        return "engine JVM" if b"spark" in text.lower() else "Java worker"
    if b"pyspark" in text or b"spark_worker_daemon" in text:
        return "engine Python workers"
    if b"dagster._daemon" in text or b"dagster-daemon" in text:
        return "daemon"
    if b"webserver" in text:
        return "webserver"
    if b"api grpc" in text or b"code-server" in text:
        return "code server"
    if b"execute_run" in text or b"spawn_main" in text or b"api execute" in text:
        return "run workers"
    return "dagster dev"


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure_processes(roots: tuple[int, ...], seconds: float) -> dict:
    """% of one core per kind over `seconds` (a process gone by the end counts as `exited meanwhile`: its command line
    is gone with it), and resident MB per kind at the end."""
    with TreeCpu(*roots) as tree_cpu:
        time.sleep(seconds)
        used = tree_cpu.by_process()
    cpu, rss = Counter(), Counter()
    for pid, seconds_used in used.items():
        kind = _kind(pid)
        cpu[kind or "exited meanwhile"] += seconds_used / seconds * 100
        if kind is not None:
            rss[kind] += _rss(pid) / 2**20
    return {"cpu_pct": {k: round(v, 1) for k, v in sorted(cpu.items())}, "cpu_pct_total": round(sum(cpu.values()), 1),
            "rss_mb": {k: round(v) for k, v in sorted(rss.items())}, "rss_mb_total": round(sum(rss.values()))}


class Traffic:
    """`rate` records a second to every topic, each record's value its send time."""

    def __init__(self, topics: list[str], rate: float):
        self.topics, self.rate = topics, rate
        self.sent = 0

    def run(self, seconds: float) -> None:
        producer, started = kafka_producer(), time.time()
        while (now := time.time()) - started < seconds:
            due = int((now - started) * self.rate) + 1
            while self.sent < due * len(self.topics):
                producer.produce(self.topics[self.sent % len(self.topics)], value=repr(time.time()).encode())
                self.sent += 1
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(30)


def publish_latencies(subscriptions: list[str], expected: int, timeout_s: float = 120) -> list[tuple[float, float]]:
    """(send time, Pub/Sub publish time - send time) of every message in the subscriptions (pulled after the run)."""
    from google.cloud import pubsub_v1

    subscriber, latencies = pubsub_v1.SubscriberClient(), []
    deadline = time.monotonic() + timeout_s
    while len(latencies) < expected and time.monotonic() < deadline:  # a fleet behind catches up meanwhile
        for subscription in subscriptions:
            while time.monotonic() < deadline:
                response = subscriber.pull(subscription=subscription, max_messages=1000, return_immediately=True)
                if not response.received_messages:
                    break
                subscriber.acknowledge(subscription=subscription,
                                       ack_ids=[m.ack_id for m in response.received_messages])
                for m in response.received_messages:
                    try:
                        sent_at = float(m.message.data.decode())
                    except ValueError:
                        continue  # a warm-up record
                    latencies.append((sent_at, m.message.publish_time.timestamp() - sent_at))
        if len(latencies) < expected:
            time.sleep(2)
    if len(latencies) < expected:
        raise RuntimeError(f"only {len(latencies)} of {expected} records arrived")
    return latencies


def _quantiles(sent_and_latencies: list[tuple[float, float]]) -> dict:
    """p50, p99 and max across the fleet, and the p99 of each 5 s of sending (a tail from one stall shows as one
    bad window, a tail from a saturated worker as many)."""
    latencies = [latency for _, latency in sent_and_latencies]
    cuts = statistics.quantiles(latencies, n=100)
    first = min(sent for sent, _ in sent_and_latencies)
    windows: dict[int, list[float]] = {}
    for sent, latency in sent_and_latencies:
        windows.setdefault(int((sent - first) // 5) * 5, []).append(latency)
    return {"records": len(latencies), "p50_s": round(cuts[49], 3), "p99_s": round(cuts[98], 3),
            "max_s": round(max(latencies), 3), "over_1s": sum(latency > 1 for latency in latencies),
            "p99_by_5s_of_sending": {start: round(statistics.quantiles(ws, n=100)[98], 3) if len(ws) > 1 else ws[0]
                                     for start, ws in sorted(windows.items())}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_record_each(topics: list[str]) -> None:
    """A warm-up record (not a send time: the latencies skip it) to every topic."""
    producer = kafka_producer()
    for topic in topics:
        producer.produce(topic, value=b"warm-up")
    producer.flush(30)


def _fleet_topics(count: int) -> tuple[list[str], list[str]]:
    fresh_pubsub()
    topics, subscriptions = [], []
    for _ in range(count):
        name = kafka_topic(unique_name("fleet"), 1)
        subscriptions.append(pubsub_topic(name)[1])
        topics.append(name)
    return topics, subscriptions


def ours(count: int, rate: float, seconds: float, remote: str, engine_pid: int, shape: str, failing: int = 0) -> dict:
    """`shape`: hosted (the entries say no mode and no host: the defaults, always on in the host `default`, one run
    moving them all), own-runs (each continuous bridge a run of its own, `host: null`) or batch (micro-batch mode,
    seed defaults: each bridge's sensor starts a run per batch). `failing` more bridges, beside the `count` measured,
    get the same traffic into a Pub/Sub topic that does not exist: each fails at its first record, for the whole run
    (the row says whether one ever delivered)."""
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

    topics, subscriptions = _fleet_topics(count)
    failing_topics = [kafka_topic(unique_name("fleet-fail"), 1) for _ in range(failing)]
    how = {"batch": {"mode": "batch"}, "own-runs": {"continuous": {"host": None}}, "hosted": {}}[shape]
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        (work / "bridges.yaml").write_text(yaml.safe_dump({"bridges": [
            {"name": f"fleet_{i}", "connector": "CloudPubSubSinkConnector",
             "config": {"topics": t, "cps.project": PROJECT, "cps.topic": t}, **how}
            for i, t in enumerate(topics)] + [
            {"name": f"failing_{i}", "connector": "CloudPubSubSinkConnector",
             "config": {"topics": t, "cps.project": PROJECT, "cps.topic": f"{t}-missing"}, **how}
            for i, t in enumerate(failing_topics)]}))
        # A bridge materializes only when it moved records (a batch bridge's sensor starts a run only for records
        # waiting): one each, so that the wait below sees every bridge move.
        _one_record_each(topics)
        home = work / "dagster_home"
        home.mkdir()
        # Each always-on bridge holds a run slot for its run's length: the queue must let every one run.
        instance_yaml = yaml.safe_load((PROJECT_ROOT / "dagster_home" / "dagster.yaml").read_text())
        coordinator = instance_yaml["run_coordinator"]["config"]
        coordinator["max_concurrent_runs"] = max(coordinator["max_concurrent_runs"], count)
        (home / "dagster.yaml").write_text(yaml.safe_dump(instance_yaml))
        env = {**os.environ, "BRIDGES_FILE": str(work / "bridges.yaml"), "DAGSTER_HOME": str(home),
               "BRIDGE_SPARK_REMOTE": remote}
        log = BENCH_STACK_HOME / f"fleet-{count}.log"
        # The home's SQLite tables are made on its first open, before `dagster dev` opens it: opened by both at once,
        # it got two alembic heads, and the code server refused to load ("more than one head present").
        with DagsterInstance.from_config(str(home)) as instance:
            instance.get_run_records(limit=1)
        dev = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "dagster"), "dev", "-w",
                                "workspace.yaml", "-p", str(_free_port()), "--log-level", "warning"], env=env,
                               cwd=PROJECT_ROOT, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                               start_new_session=True, preexec_fn=hear_sigint)
        try:
            asked = time.monotonic()
            with DagsterInstance.from_config(str(home)) as instance:
                # Every bridge moving: each has recorded its first records.
                while not all(instance.get_latest_materialization_event(AssetKey(f"fleet_{i}"))
                              for i in range(count)):
                    if dev.poll() is not None or time.monotonic() - asked > 600:
                        raise RuntimeError(f"the fleet's bridges did not all start; see {log}")
                    time.sleep(1)
                records = instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
                waits = sorted(r.start_time - r.create_timestamp.timestamp() for r in records) or [0.0]
                # From the first run's start (a host's, or the first bridge's own) to the last bridge's first record.
                first_moved = [instance.fetch_materializations(AssetKey(f"fleet_{i}"), limit=1, ascending=True)
                               .records[0].timestamp for i in range(count)]
                from_run_start = max(first_moved) - min(r.start_time for r in records) if records else None
            all_started_s = time.monotonic() - asked
            time.sleep(SETTLE_S)
            row = _measure(topics, subscriptions, rate, seconds, (dev.pid, engine_pid), failing_topics) | {
                "runs": len(records), "all_bridges_moving_s": round(all_started_s, 1),
                "all_moving_after_run_start_s": None if from_run_start is None else round(from_run_start, 1),
                "run_start_wait_s": {"median": round(statistics.median(waits), 1), "max": round(waits[-1], 1)}}
            if failing:
                row["failing_bridges_checks"] = _batch_checks(home, [f"failing_{i}" for i in range(failing)])
            return row
        finally:
            os.killpg(dev.pid, signal.SIGINT)
            try:
                dev.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(dev.pid, signal.SIGKILL)


def _batch_checks(home: Path, bridges: list[str]) -> dict[str, int]:
    """How the `batch_succeeded` check of these bridges evaluated: failed and passed counts, and how many passed after
    the bridge's first failure (a failing bridge's row is meaningful only if none did)."""
    from dagster import AssetCheckKey, AssetKey, DagsterInstance

    counts = Counter({"failed": 0, "passed": 0, "passed_after_first_failure": 0})
    with DagsterInstance.from_config(str(home)) as instance:
        for bridge in bridges:
            key = AssetCheckKey(AssetKey(bridge), "batch_succeeded")
            history = instance.event_log_storage.get_asset_check_execution_history(key, limit=10_000)
            outcomes = [record.event.asset_check_evaluation.passed for record in reversed(history)  # oldest first
                        if record.event is not None and record.event.asset_check_evaluation is not None]
            counts["failed"] += outcomes.count(False)
            counts["passed"] += outcomes.count(True)
            if False in outcomes:
                counts["passed_after_first_failure"] += outcomes[outcomes.index(False):].count(True)
    return dict(counts)


def java(count: int, rate: float, seconds: float) -> dict:
    from bench.java_reference import add_connector, java_reference

    topics, subscriptions = _fleet_topics(count)
    folder = BENCH_STACK_HOME / "java-fleet"
    shutil.rmtree(folder, ignore_errors=True)
    with java_reference(folder) as reference:

        def connector(topic: str) -> dict:
            return reference.connector_config(topic, {"connector.class": JAVA_SINK, "tasks.max": "1", "topics": topic,
                                                "cps.project": PROJECT, "cps.topic": topic})

        worker, log, port = reference.start_worker(topics[0], connector(topics[0]))
        try:
            deadline = time.monotonic() + 180
            while "Adding newly assigned partitions" not in log.read_text(errors="replace"):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Java worker did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
            for topic in topics[1:]:
                add_connector(port, connector(topic))
            while log.read_text(errors="replace").count("Adding newly assigned partitions") < count:
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Java worker did not start every connector:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
            time.sleep(SETTLE_S)
            return _measure(topics, subscriptions, rate, seconds, (worker.pid,))
        finally:
            worker.terminate()
            worker.wait(30)


def _measure(topics: list[str], subscriptions: list[str], rate: float, seconds: float, roots: tuple[int, ...],
             unmeasured_topics: list[str] = ()) -> dict:
    """Warm-up, then `seconds` of traffic with the CPU measured over its middle, then idle. `unmeasured_topics` get
    the same traffic; their records' latencies are not read."""
    import threading

    every_topic = [*topics, *unmeasured_topics]
    _one_record_each(every_topic)  # through every bridge first: the fleet is measured warm
    time.sleep(5)
    traffic = Traffic(every_topic, rate)
    sending = threading.Thread(target=traffic.run, args=(seconds,))
    sending.start()
    time.sleep(max(0.0, (seconds - WINDOW_S) / 2))
    steady = measure_processes(roots, min(WINDOW_S, seconds))
    sending.join()
    time.sleep(10)
    idle = measure_processes(roots, WINDOW_S)
    # Traffic sends to the topics in turn, the same number to each.
    latencies = publish_latencies(subscriptions, traffic.sent // len(every_topic) * len(topics))
    return {"bridges": len(topics), "sent": traffic.sent, **_quantiles(latencies), "steady": steady, "idle": idle}


def _describe(row: dict) -> str:
    return (f"steady {row['steady']['cpu_pct_total']} % of a core, idle {row['idle']['cpu_pct_total']} %, "
            f"{row['steady']['rss_mb_total']:,} MB, p50 {row['p50_s']} s, p99 {row['p99_s']} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bridges", default="1,10,30")
    parser.add_argument("--rate", type=float, default=20, help="records/s per bridge")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=3, help="of each fleet size, the sides in turn")
    parser.add_argument("--no-java", action="store_true")
    parser.add_argument("--own-runs", action="store_true",
                        help="also each bridge in a run of its own (continuous.host: null), beside the hosted fleet")
    parser.add_argument("--batch", action="store_true",
                        help="also the same bridges in micro-batch mode (a run per batch, started by each sensor)")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "fleet.json"))
    args = parser.parse_args()
    results: dict = {"rate_per_bridge": args.rate, "seconds": args.seconds, "rounds": args.rounds, "ours": {},
                     "ours_own_runs": {}, "ours_batch": {}, "java": {}}
    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        engine_pid = {s.name: s.pid for s in stack.status()}["spark"]
        counts = [int(n) for n in args.bridges.split(",")]
        results["warm_up"] = f"an untimed round of ours, {max(counts)} bridges, {WARM_UP_S} s of traffic"
        print(f"warming the stack: {results['warm_up']} ...", flush=True)
        ours(max(counts), args.rate, WARM_UP_S, remote, engine_pid, "hosted")
        for count in counts:
            sides: dict[str, Callable[[int], dict]] = {
                "ours": lambda _round, n=count: ours(n, args.rate, args.seconds, remote, engine_pid, "hosted")}
            for wanted, shape, key in ((args.own_runs, "own-runs", "ours_own_runs"), (args.batch, "batch", "ours_batch")):
                if wanted:
                    sides[key] = lambda _round, n=count, shape=shape: ours(n, args.rate, args.seconds, remote,
                                                                           engine_pid, shape)
            if not args.no_java:
                sides["java"] = lambda _round, n=count: java(n, args.rate, args.seconds)
            rows = alternating_rounds(args.rounds, sides, lambda line, n=count: print(f"fleet of {n}: {line}",
                                                                                        flush=True), _describe)
            for key, side_rows in rows.items():
                results[key][count] = side_rows
    write_results(Path(args.out), results)
    print(render(json.loads(Path(args.out).read_text())))


def _rounds(results: dict, key: str, count: int) -> list[dict]:
    """A side's rows at a fleet size, one per round (a file of one round per size holds the row alone)."""
    rows = (results.get(key) or {}).get(str(count))
    return [] if not rows else rows if isinstance(rows, list) else [rows]


_FIGURES = {  # name -> how a row gives it
    "steady CPU": lambda r: r["steady"]["cpu_pct_total"], "idle CPU": lambda r: r["idle"]["cpu_pct_total"],
    "memory": lambda r: r["steady"]["rss_mb_total"], "p99": lambda r: r["p99_s"]}


def render(results: dict) -> str:
    """For each fleet size and side: steady and idle CPU and memory of all its processes, send -> publish latency,
    and how long until every bridge moved, medians (min-max) of the rounds; ours over Java's by the medians."""
    sides = [("ours", "ours, one host"), ("ours_own_runs", "ours, a run each"), ("ours_batch", "ours, micro-batches"),
             ("java", "Java worker")]
    rounds = results.get("rounds", 1)
    lines = [f"{results['rate_per_bridge']} records/s per bridge for {results['seconds']} s, "
             + (f"{rounds} rounds, the sides in turn: medians (min-max)." if rounds > 1 else "one run per row.")
             + (f" Before them, {results['warm_up']} warmed the stack." if results.get("warm_up") else ""), "",
             "| bridges | side | steady CPU (% of a core) | idle CPU | steady memory (MB) | p50 | p99 | all moving after "
             "(from `dagster dev`'s start / the run's) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    counts = sorted({int(n) for key, _ in sides for n in (results.get(key) or {})})
    ratios = []
    for count in counts:
        for key, label in sides:
            rows = _rounds(results, key, count)
            if not rows:
                continue
            moving = median_spread([r["all_bridges_moving_s"] for r in rows], "{:.1f}") + " s" \
                if rows[0].get("all_bridges_moving_s") is not None else "–"
            if rows[0].get("all_moving_after_run_start_s") is not None:
                moving += " / " + median_spread([r["all_moving_after_run_start_s"] for r in rows], "{:.1f}") + " s"
            cells = [median_spread([figure(r) for r in rows], fmt) + unit for figure, fmt, unit in (
                (_FIGURES["steady CPU"], "{:.1f}", ""), (_FIGURES["idle CPU"], "{:.1f}", ""),
                (_FIGURES["memory"], "{:,.0f}", ""), (lambda r: r["p50_s"], "{:.3f}", " s"),
                (_FIGURES["p99"], "{:.3f}", " s"))]
            lines.append(f"| {count} | {label} | {' | '.join(cells)} | {moving} |")
        ours_rows, java_rows = _rounds(results, "ours", count), _rounds(results, "java", count)
        if ours_rows and java_rows:
            ratios.append(f"| {count} | " + " | ".join(_ratio(ours_rows, java_rows, figure) for figure in _FIGURES)
                          + " |")
    if ratios:
        lines += ["", "Ours (one host) over the Java worker, by the medians; *overlapping* where the two sides' "
                  "min-max overlap (the gap is then inside the rounds' spread):", "",
                  "| bridges | " + " | ".join(_FIGURES) + " |", "| --- |" + " --- |" * len(_FIGURES), *ratios]
    hosted = _rounds(results, "ours", counts[-1]) if counts else []
    if hosted:
        lines += ["", *_split_lines(counts[-1], hosted)]
    return "\n".join(lines) + "\n"


def _ratio(ours_rows: list[dict], java_rows: list[dict], figure: str) -> str:
    ours_values, java_values = [_FIGURES[figure](r) for r in ours_rows], [_FIGURES[figure](r) for r in java_rows]
    ratio = statistics.median(ours_values) / statistics.median(java_values)
    overlap = ranges_overlap(ours_values, java_values)
    return f"{ratio:.2f}x" + (" *overlapping*" if overlap and len(ours_rows) > 1 else "")


def _split_lines(count: int, rows: list[dict]) -> list[str]:
    """Where one host's CPU and memory go, by process kind, steady and idle: the round whose steady CPU is the
    median's (the lower middle one of an even number)."""
    row = sorted(rows, key=lambda r: r["steady"]["cpu_pct_total"])[(len(rows) - 1) // 2]
    kinds = sorted(set(row["steady"]["cpu_pct"]) | set(row["idle"]["cpu_pct"]),
                   key=lambda kind: (-row["steady"]["cpu_pct"].get(kind, 0), kind))  # a tie by name: the same page
    which = " (the round of the median steady CPU)" if len(rows) > 1 else ""
    lines = [f"Where ours goes at {count} bridges on one host, by process{which} (% of a core; MB steady):", "",
             "| process | steady CPU | idle CPU | memory (MB) |", "| --- | --- | --- | --- |"]
    for kind in kinds:
        lines.append(f"| {kind} | {row['steady']['cpu_pct'].get(kind, 0)} | {row['idle']['cpu_pct'].get(kind, 0)} | "
                     f"{row['steady']['rss_mb'].get(kind, 0):,} |")
    return lines

if __name__ == "__main__":
    main()
