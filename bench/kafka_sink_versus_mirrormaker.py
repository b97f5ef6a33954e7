"""The Kafka -> Kafka bridge beside MirrorMaker 2, in rounds (about 15 minutes on 2 cores):

    python -m bench.kafka_sink_versus_mirrormaker [--records 4000000] [--size 1024] [--rounds 3] [--exactly-once]
                                                  [--command-records 1000000]

On one fresh stack (its two Kafka clusters, no emulator anywhere), each round copies the same source topic of
`--records` records (4 partitions) to the target cluster, one side after the other, the order alternating (each
copy's topic is deleted after its row, so the rounds fit the disk):
- MirrorMaker 2: Apache Kafka's MirrorSourceConnector (connect-mirror 4.1.1, tasks.max=2, its defaults, ByteArray
  converters) on a warm Kafka Connect standalone worker: a first connector copies a warm-up topic of
  `--command-records` records in the same JVM, then the row's connector is added through the worker's REST API. The
  target topic is made first with LogAppendTime; the row is first to last arrival there, the JVM's CPU over the same
  span.
- ours: the Kafka sink (KafkaSinkConnector, at least once) in one micro-batch on the warm Spark Connect engine, after
  an untimed batch; its row is the batch (plan to last delivery), its CPU the run process's and the engine's.
- ours always on: the same bridge in a continuous run of its own (`dagster job execute` of its job, tasks.max=2)
  draining the topic from its earliest offsets; its row is first to last arrival, as MirrorMaker 2's is, its CPU
  the run's and the engine's from the first arrival seen to the last.
- the whole command, as a user runs each, copying the warm-up topic (`--command-records` whatever `--records` is,
  so that the command's start weighs the same in every run): `dagster asset materialize` of a batch bridge of the
  Kafka sink on the warm engine, each in the one Dagster instance of the bench's commands (after an untimed one,
  which makes the instance's storage and the shared Spark Connect session as a deployment's first command does),
  from the command's start to its exit (its process, the code location's load and the session's check included)
  and to the last arrival; MirrorMaker 2 from adding a third connector to the same warm worker to the last
  arrival.
With --exactly-once both sides copy exactly once: MirrorMaker 2 on a one-worker distributed cluster with KIP-618's
exactly.once.source.support (a standalone worker has none) and `exactly.once.support=required`, its source consumer
reading committed records; ours with `exactly.once.support=required`.
Before the rounds, the brokers' own limit, each direction alone: Kafka's ConsumerPerformance (Kafka's tools 4.1.1,
Java) reading the row's topic, and librdkafka writing as many records of the same size (idempotent, acks=all) from a
Python loop (faster here than Kafka's ProducerPerformance).
Prints medians with min-max, the ratio of medians and the brokers' own limit beside them, says which rows moved
for less than 20 s (too short to be steady: raise --records), and writes
bench/kafka_sink_versus_mirrormaker.json (`_<size>b` before `.json` at another size than 1 KiB, `_exactly_once`
with --exactly-once).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.markdown import Markdown

from bench import limits
from bench.common import (
    BENCH_STACK_HOME, alternating_rounds, attached_stack, bench_stack, median_spread, ranges_overlap, rounds_arguments,
    rounds_summary, short_rows_line, spreads_overlap, stack_services, warm_engine, write_results,
)
from bench.comparisons import write_table
from bench.data import delete_kafka_topic, kafka_topic, unique_name
from bench.continuous import continuous_log, continuous_run
from bench.java_reference import Arrivals, JavaReference, add_connector, arrival_span, stop_worker, wait_for_arrivals
from bench.process_memory import TreeCpu
from local_stack import fetch

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = HERE.parent
PARTITIONS = 4


def _admin(bootstrap: str):
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    return KafkaAdmin(KafkaConnection(bootstrap))


def _delete_copy(topic: str) -> None:
    """Delete a row's copy on the target cluster once measured: a round writes several GB."""
    delete_kafka_topic(os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"], topic)


# Who measured a results file's brokers' limit. Reading: Kafka's ConsumerPerformance, or (files from before it did) a
# Python loop over librdkafka, which read slower than the bridge copies 100 B records. Writing: librdkafka from a
# Python loop, which wrote 2x as fast as Kafka's ProducerPerformance at 1 KiB here (batch.size=1000000 and the same
# idempotent settings: 163,000-168,000 against 337,000-380,000 records/s).
LIMIT_BY_TOOLS = "reading: Kafka's ConsumerPerformance 4.1.1; writing: librdkafka"
LIMIT_BY_PYTHON = "librdkafka from a Python loop"


def mirror_config(alias: str, topic: str, exactly_once: bool = False) -> dict[str, str]:
    """A MirrorSourceConnector copying `topic` from the stack's Kafka (named `alias`) to `<alias>.<topic>` on the
    target cluster, the worker's own; `exactly_once`: KIP-618's, which MirrorSourceConnector supports when its
    source consumer reads committed records only."""
    eos = {"exactly.once.support": "required", "source.consumer.isolation.level": "read_committed"}
    return {**(eos if exactly_once else {}), "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "tasks.max": "2",
            "source.cluster.alias": alias, "target.cluster.alias": "target", "topics": topic,
            "source.cluster.bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
            "target.cluster.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "sync.topic.acls.enabled": "false", "sync.topic.configs.enabled": "false",
            "refresh.topics.interval.seconds": "1"}


def mirror_row(topic: str, records: int, warm_up: str, warm_up_records: int, round_no: int,
               exactly_once: bool = False, timeout_s: float = 900) -> dict:
    """MirrorMaker 2 on a warm worker: the warm-up connector copies `warm_up`, then the row's connector `topic`, then
    (at least once) a third connector `warm_up` again, for the whole command's row. At least once on a standalone
    worker; `exactly_once` on a one-worker distributed cluster (KIP-618 needs one)."""
    target_bootstrap = os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
    target = _admin(target_bootstrap)
    row_alias, warm_alias, command_alias = f"row{round_no}", f"warm{round_no}", f"mm2-command{round_no}"
    copies = ((row_alias, topic), (warm_alias, warm_up), *(() if exactly_once else ((command_alias, warm_up),)))
    for alias, name in copies:
        target.create_topic(f"{alias}.{name}", PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    folder = BENCH_STACK_HOME / f"mirrormaker-{round_no}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "hosts").write_text("127.0.0.1 localhost\n")  # the worker's JVM resolves names from this file only
    worker_home = JavaReference(folder, folder, target_bootstrap)
    deadline = time.monotonic() + timeout_s
    classpath = str(fetch.kafka_mirror_jars() / "*")
    warm_name, warm_config = unique_name("mm2-warm-up"), mirror_config(warm_alias, warm_up, exactly_once)
    if exactly_once:
        worker, log, port = worker_home.start_distributed_worker(unique_name("mm2-cluster"), classpath, True)
    else:
        worker, log, port = worker_home.start_worker(warm_name, warm_config, classpath)
    try:
        if exactly_once:
            add_connector(port, worker_home.connector_config(warm_name, warm_config))
        wait_for_arrivals(target, worker, log, f"{warm_alias}.{warm_up}", warm_up_records, deadline, exactly_once)
        add_connector(port, worker_home.connector_config(unique_name("mm2-row"),
                                                         mirror_config(row_alias, topic, exactly_once)))
        copied = f"{row_alias}.{topic}"
        arrivals = wait_for_arrivals(target, worker, log, copied, records, deadline, exactly_once)
        command = {}
        if not exactly_once:
            added = time.time()
            add_connector(port, worker_home.connector_config(unique_name("mm2-command"),
                                                             mirror_config(command_alias, warm_up)))
            command_copy = f"{command_alias}.{warm_up}"
            wait_for_arrivals(target, worker, log, command_copy, warm_up_records, deadline)
            _, command_last = arrival_span(command_copy, list(range(PARTITIONS)), warm_up_records, target_bootstrap)
            command = {"command_records": warm_up_records, "command_seconds": round(command_last - added, 3)}
    finally:
        stop_worker(worker)
    first, last = arrival_span(copied, list(range(PARTITIONS)), records, target_bootstrap)
    for alias, name in copies:
        _delete_copy(f"{alias}.{name}")
    return {**_arrivals_row(records, last - first, arrivals), "peak_mb": round(arrivals.peak / 1e6), **command}


def _arrivals_row(records: int, seconds: float, arrivals: Arrivals) -> dict:
    """A row timed by its arrivals: the CPU counted from the first records seen is that of the records after them."""
    cpu, counted = arrivals.done_cpu - arrivals.first_cpu, records - arrivals.first_written
    return {"records": records, "seconds": round(seconds, 3), "cpu_s": round(cpu, 2),
            "cpu_per_100k": round(cpu * 100_000 / counted, 2), "first_seen": arrivals.first_written}


# The Dagster instance every command row runs in, as a deployment's commands all do: the first command makes its
# storage and the shared Spark Connect session (and with it the session's Python workers); later ones reuse both.
COMMAND_HOME = BENCH_STACK_HOME / "command-instance"


def our_command_row(topic: str, records: int, label: str) -> dict:
    """`dagster asset materialize` of a batch bridge of the Kafka sink copying `topic` to `<label>.<topic>` from the
    earliest offsets, on the warm engine, in the Dagster instance of COMMAND_HOME."""
    target_bootstrap = os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
    copied, name = f"{label}.{topic}", f"bench_{label.replace('-', '_')}"
    _admin(target_bootstrap).create_topic(copied, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    COMMAND_HOME.mkdir(parents=True, exist_ok=True)
    bridges = COMMAND_HOME / f"bridges-{label}.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "KafkaSinkConnector", "mode": "batch",
        "config": {"topics": topic, "target.bootstrap.servers": target_bootstrap,
                   "topic.rename.format": f"{label}.${{topic}}"},
        "batch": {"max_records": records, "initial_offsets": "earliest"}}]}))
    env = {**os.environ, "BRIDGES_FILE": str(bridges), "DAGSTER_HOME": str(COMMAND_HOME),
           "BRIDGE_SPARK_REMOTE": attached_engine()}
    dagster = str(Path(sys.executable).parent / "dagster")
    started = time.time()
    result = subprocess.run([dagster, "asset", "materialize", "-m", "bridge_assets", "--select", name], env=env,
                            cwd=PROJECT_ROOT, capture_output=True, text=True)
    ended = time.time()
    if result.returncode != 0:
        log = COMMAND_HOME / f"materialize-{label}.log"
        log.write_text(result.stdout + result.stderr)
        errors = [line for line in result.stderr.splitlines() if "Error" in line or "Failure" in line]
        raise RuntimeError(f"dagster asset materialize failed ({log}): {errors[-1:]}")
    _, last = arrival_span(copied, list(range(PARTITIONS)), records, target_bootstrap)
    _delete_copy(copied)
    return {"records": records, "seconds": round(ended - started, 3), "to_last_arrival": round(last - started, 3)}


def our_always_on_row(topic: str, records: int, label: str, engine_pid: int, exactly_once: bool = False) -> dict:
    """Ours always on: the Kafka sink in a continuous run of its own (`dagster job execute` of the bridge's job,
    tasks.max=2 as MirrorMaker 2 has) on the warm engine, draining `topic` from its earliest offsets into
    `<label>.<topic>`. Measured as MirrorMaker 2's row is: first to last arrival (LogAppendTime); CPU: the run's
    process tree and the engine's from the first arrival seen to the last (the run starts moving before the
    bench sees it: the records there at the first look are not counted in the CPU per record)."""
    target_bootstrap = os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
    copied, name = f"{label}.{topic}", f"bench_{label.replace('-', '_')}"
    target = _admin(target_bootstrap)
    target.create_topic(copied, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    entry = {"name": name, "connector": "KafkaSinkConnector",
             "config": {"topics": topic, "target.bootstrap.servers": target_bootstrap,
                        "topic.rename.format": f"{label}.${{topic}}", "tasks.max": "2",
                        **({"exactly.once.support": "required"} if exactly_once else {})},
             "batch": {"initial_offsets": "earliest"}}
    with continuous_run(entry, attached_engine(), settle_s=0) as run:
        arrivals = wait_for_arrivals(target, run, continuous_log(name), copied, records, time.monotonic() + 600,
                                     exactly_once, also=(engine_pid,))
    first, last = arrival_span(copied, list(range(PARTITIONS)), records, target_bootstrap)
    _delete_copy(copied)
    return _arrivals_row(records, last - first, arrivals)


def attached_engine() -> str:
    """The bench stack's warm Spark Connect engine, for a run process."""
    return attached_stack().env()["BRIDGE_SPARK_REMOTE"]


def our_row(spark, server_pid: int, topic: str, records: int, label: str, exactly_once: bool = False,
            services: tuple[int, ...] = ()) -> dict:
    """The Kafka sink copying `topic` to `<label>.<topic>` in one batch from the earliest offsets; `exactly_once`:
    with exactly.once.support=required. Its CPU: this process (the run's driver) and the Spark Connect server, not
    the stack's `services`, which this process started."""
    from connectors.bridge import BatchSettings
    from connectors.kafka_sink.config import KafkaSinkConfig
    from connectors.kafka_sink.plugin import run_replica_batch

    admin = _admin(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
    config = KafkaSinkConfig.model_validate({
        "topics": topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
        "topic.rename.format": f"{label}.${{topic}}",
        **({"exactly.once.support": "required"} if exactly_once else {})})
    bridge = f"bench_{label}"
    with TreeCpu(os.getpid(), server_pid, excluded=services) as cpu:
        result = run_replica_batch(spark, bridge, config, admin, {},
                                   BatchSettings(max_records=records, initial_offsets="earliest"), f"connect-{bridge}")
        cpu_s = cpu.seconds()
    if result.batch.totals["records"] != records:
        raise RuntimeError(f"ours copied {result.batch.totals['records']:,} records of {records:,}")
    _delete_copy(f"{label}.{topic}")
    return {"records": records, "seconds": round(result.batch.duration_s, 3), "cpu_s": round(cpu_s, 2),
            "cpu_per_100k": round(cpu_s * 100_000 / records, 2)}


def render(results: dict) -> str:
    ours, mm2 = rounds_summary(results["ours"]), rounds_summary(results["mirrormaker"])
    always_on = rounds_summary(results["ours_always_on"]) if results.get("ours_always_on") else None
    ratio, cpu_ratio = ours["rate_median"] / mm2["rate_median"], ours["cpu_median"] / mm2["cpu_median"]
    limit = results["brokers_limit"]
    lines = [f"Measured {results['date']} on {results['cores']} cores: Kafka -> Kafka between the stack's two "
             f"clusters, {results['records']:,} records of {results['size']:,} B per row, {PARTITIONS} partitions, "
             f"{results['rounds']} rounds with the order alternating. MirrorMaker 2: MirrorSourceConnector "
             "(connect-mirror 4.1.1, tasks.max=2) on a warm worker, first to last arrival; ours: the Kafka sink, one "
             "micro-batch on the warm Spark Connect engine, plan to last delivery"
             + ("; ours always on: a continuous run of its own (tasks.max=2) draining the topic, first to last "
                "arrival" if always_on else "") +
             ". Medians (min-max). CPU: the worker's JVM; for ours the run process and the Spark Connect server."
             + (" **Both exactly once**: MirrorMaker 2 on a one-worker distributed cluster with "
                "exactly.once.source.support=enabled and exactly.once.support=required (its source consumer "
                "read_committed), ours with exactly.once.support=required." if results.get("exactly_once") else ""),
             "",
             "| | records/s | CPU s per 100k |",
             "| --- | --- | --- |"]
    for name, s in (("ours", ours), *((("ours, always on", always_on),) if always_on else ()), ("MirrorMaker 2", mm2)):
        lines.append(f"| {name} | {s['rate_median']:,.0f} ({s['rate_min']:,.0f}-{s['rate_max']:,.0f}) | "
                     f"{s['cpu_median']:.2f} ({s['cpu_min']:.2f}-{s['cpu_max']:.2f}) |")
    lines.append(f"| the brokers' limit ({results.get('brokers_limit_by', LIMIT_BY_PYTHON)}): one consumer, one "
                 f"producer, each alone | {limit['consume']:,.0f} / {limit['produce']:,.0f} | |")
    lines += ["", f"Ours ÷ MirrorMaker 2: **{ratio:.2f}x** the records/s (target 3x) at **{cpu_ratio:.2f}x** the "
              f"CPU per record (target at most 0.4x); ours at **{ours['rate_median'] / min(limit.values()):.2f}x** "
              "the lower of the brokers' limits (target at least 0.8x)."]
    if spreads_overlap(ours, mm2):
        lines.append("The two spreads overlap: the gap between the medians is within this machine's noise.")
    short = short_rows_line({name: results[key] for name, key in (
        ("ours", "ours"), ("ours always on", "ours_always_on"), ("MirrorMaker 2", "mirrormaker")) if results.get(key)})
    if short:
        lines.append(short)
    if always_on:
        lines.append(f"Always on ÷ MirrorMaker 2: **{always_on['rate_median'] / mm2['rate_median']:.2f}x** the "
                     f"records/s at **{always_on['cpu_median'] / mm2['cpu_median']:.2f}x** the CPU per record"
                     + (" (the spreads overlap)." if spreads_overlap(always_on, mm2) else "."))
    if "ours_command" in results:
        lines += ["", *_command_lines(results)]
    return "\n".join(lines) + "\n"


def _command_lines(results: dict) -> list[str]:
    """The whole command's wall clock: ours `dagster asset materialize` to its exit and to the last arrival,
    MirrorMaker 2 from adding its connector to a warm worker to the last arrival."""
    ours = [r["seconds"] for r in results["ours_command"]]
    ours_arrival = [r["to_last_arrival"] for r in results["ours_command"]]
    mm2 = [r["command_seconds"] for r in results["mirrormaker"]]
    records = results["ours_command"][0]["records"]
    ratio = statistics.median(mm2) / statistics.median(ours)
    lines = [f"The whole command copying {records:,} records, wall clock in seconds (medians, min-max):", "",
             "| | to the last arrival | to the command's exit |", "| --- | --- | --- |",
             f"| ours: `dagster asset materialize` of a batch bridge | {median_spread(ours_arrival, '{:.1f}')} | "
             f"{median_spread(ours, '{:.1f}')} |",
             f"| MirrorMaker 2: its connector added to a warm worker | {median_spread(mm2, '{:.1f}')} | |",
             "", f"MirrorMaker 2's time ÷ ours to the command's exit: **{ratio:.2f}x** (target 2x)."]
    if ranges_overlap(ours, mm2):
        lines.append("The two spreads overlap: the gap between the medians is within this machine's noise.")
    return lines


def main() -> None:
    parser = rounds_arguments(__doc__, records=4_000_000)
    parser.add_argument("--command-records", type=int, default=1_000_000,
                        help="the warm-up topic's records, which the whole command's rows copy too")
    parser.add_argument("--exactly-once", action="store_true",
                        help="both sides exactly once: MirrorMaker 2 on an exactly-once distributed worker, ours with "
                             "exactly.once.support=required (no whole-command side)")
    args = parser.parse_args()
    console = Console(stderr=True)
    results = {"records": args.records, "size": args.size, "rounds": args.rounds, "exactly_once": args.exactly_once}
    eos, warm_up_records = args.exactly_once, args.command_records
    with bench_stack() as stack:
        console.print(f"filling the row topic with {args.records:,} records of {args.size:,} B and the warm-up topic "
                      f"with {warm_up_records:,} ...")
        topic = kafka_topic(unique_name("mirror-row"), PARTITIONS, args.records, args.size)
        warm_up = kafka_topic(unique_name("mirror-warm-up"), PARTITIONS, warm_up_records, args.size)
        results["brokers_limit"] = {
            "consume": round(limits.brokers_consume(topic, args.records)),
            "produce": round(limits.kafka_produce(kafka_topic(unique_name("limit-produce"), PARTITIONS),
                                                  args.records, args.size))}
        results["brokers_limit_by"] = LIMIT_BY_TOOLS
        console.print(f"the brokers' limit: {results['brokers_limit']}")
        spark, _ = warm_engine("connect", stack.env()["BRIDGE_SPARK_REMOTE"])
        server = {s.name: s.pid for s in stack.status()}["spark"]
        services = stack_services(stack)
        # untimed: imports, producers on the workers
        our_row(spark, server, warm_up, warm_up_records, "warm-up", eos, services)
        sides = {
            "mirrormaker": lambda round_no: mirror_row(topic, args.records, warm_up, warm_up_records, round_no, eos),
            "ours": lambda round_no: our_row(spark, server, topic, args.records, f"ours{round_no}", eos, services),
            "ours_always_on": lambda round_no: our_always_on_row(topic, args.records, f"always-on{round_no}", server,
                                                                 eos)}
        if not eos:
            # untimed: the command's files in the OS's cache, the instance's storage, the shared session
            shutil.rmtree(COMMAND_HOME, ignore_errors=True)
            our_command_row(warm_up, warm_up_records, "command-warm-up")
            sides["ours_command"] = lambda round_no: our_command_row(warm_up, warm_up_records, f"command{round_no}")
        results |= alternating_rounds(args.rounds, sides, console.print)
    path = HERE / results_name(args.size, eos)
    write_results(path, results)
    write_table()  # the comparisons the docs show
    Console().print(Markdown(render(json.loads(path.read_text()))))


def results_name(size: int, exactly_once: bool) -> str:
    return ("kafka_sink_versus_mirrormaker" + ("" if size == 1024 else f"_{size}b")
            + ("_exactly_once" if exactly_once else "") + ".json")


if __name__ == "__main__":
    main()
