"""Exactly once always on, what it costs in throughput: the highest rate each exactly-once connector's
always-on bridge keeps for 60 s, with and without `exactly.once.support=required`, side by side in alternating rounds
on one stack. Target: exactly once costs at most 15 %.

The rate a bridge keeps is read as the rate it drains a backlog at: each row's bridge (a name of its own, so nothing
resumes from the row before) starts on a source holding more records than it can move in the window (1 KiB each),
and the window is the `--seconds` after its first `--lead-seconds` of moving, or less when 97 % of the backlog has
arrived (the row says how long it was). A bridge that drains R records a second keeps any rate up to R, and this
needs no sender that outruns it (the Python publishers into Lite and pstest cannot). Arrivals are counted where the
guarantee is: the sum of the target topic's `read_committed` end offsets (its last stable offsets), sampled each
second. Under exactly once that sum also counts a commit marker per partition a transaction wrote to: at most 4
partitions x 5 rounds a second, under 0.1 % of these rates (it flatters exactly once by at most that).
- KafkaSinkConnector: one source topic for every row, each row a target topic of its own (`topic.rename.format`).
- PubSubLiteSourceConnector: one Lite topic, each row a subscription of its own (made before the topic is filled;
  5.5 million messages take 10-13 minutes to publish and 12 GB of the local Lite server's memory, so its rows may end
  before 60 s).
- CloudPubSubSourceConnector: on the counting Pub/Sub endpoint (bench.pubsub_counter), each row a preloaded
  subscription of its own: pstest's Pull scans the whole backlog on every call and would be the limit.
CPU per 100k records is the run's process tree and the warm engine's over the window.

    python -m bench.exactly_once_throughput [--seconds 60] [--records N] [--rounds 3] [--only Lite,...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from bench.common import alternating_rounds, bench_stack, write_results
from bench.continuous import PARTITIONS, continuous_run
from bench.data import (
    LITE_LOCATION, PROJECT, delete_kafka_topic, kafka_topic, lite_connection, publish_lite, topic_records, unique_name,
)
from bench.process_memory import TreeCpu
from bench.pubsub_counter import PubSubCounter, running_counter
from local_stack.paths import PROJECT_ROOT

REQUIRED = {"exactly.once.support": "required"}
SIZE = 1024
SIDES = ("at least once", "exactly once")
NEARLY_OUT = 0.97  # of a row's backlog: the window ends there if it has not before


class Row:
    """What a connector's rows share in one run: `prepare` fills the source once (untimed), `bridge(side, round)` is
    a row's bridge entry and the Kafka cluster and topic its records arrive at."""

    records = 5_500_000  # each row's backlog (the sources' rows measured up to 82,000/s: a Lite row may end early)

    def __init__(self, records: int | None, rounds: int):
        self.records, self.rounds = records or self.records, rounds

    def prepare(self) -> None:
        raise NotImplementedError

    def bridge(self, exactly_once: bool, round_no: int) -> tuple[dict, str, str]:
        raise NotImplementedError

    @contextmanager
    def environment(self) -> Iterator[None]:
        yield


class KafkaSink(Row):
    records = 10_000_000  # measured: up to 103,000/s

    def prepare(self) -> None:
        self.source = kafka_topic(unique_name("eos-tp-repl"), PARTITIONS, self.records, SIZE)

    def bridge(self, exactly_once: bool, round_no: int) -> tuple[dict, str, str]:
        prefix = unique_name("row").replace("-", "")
        entry = {"name": _bridge_name("eos_throughput_kafka_sink"), "connector": "KafkaSinkConnector",
                 "batch": {"initial_offsets": "earliest"},
                 "config": {"topics": self.source, "target.bootstrap.servers": _target(),
                            "topic.rename.format": f"{prefix}.${{topic}}", **(REQUIRED if exactly_once else {})}}
        return entry, _target(), f"{prefix}.{self.source}"


class LiteSource(Row):
    def prepare(self) -> None:
        from google.cloud.pubsublite import Subscription, Topic

        from connectors.pubsublite.clients import subscription_path, topic_path

        name = unique_name("eos-tp-lite")
        self.topic = topic_path(PROJECT, LITE_LOCATION, name)
        admin = lite_connection().admin(self.topic.location.region)
        admin.create_topic(Topic(name=str(self.topic), partition_config=Topic.PartitionConfig(count=PARTITIONS),
                                 retention_config=Topic.RetentionConfig(per_partition_bytes=30 * 1024**3)))
        self.subscriptions = {}
        for side in (False, True):
            for round_no in range(self.rounds):
                path = subscription_path(PROJECT, LITE_LOCATION, f"{name}-{int(side)}-{round_no}")
                admin.create_subscription(Subscription(
                    name=str(path), topic=str(self.topic), delivery_config=Subscription.DeliveryConfig(
                        delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)))
                self.subscriptions[side, round_no] = path
        _fill_lite(self.topic, self.records)

    def bridge(self, exactly_once: bool, round_no: int) -> tuple[dict, str, str]:
        target = kafka_topic(unique_name("eos-tp-lsrc"), PARTITIONS)
        entry = {"name": _bridge_name("eos_throughput_lite_source"), "connector": "PubSubLiteSourceConnector",
                 "config": {"pubsublite.project": PROJECT, "pubsublite.location": LITE_LOCATION,
                            "pubsublite.subscription": self.subscriptions[exactly_once, round_no].name,
                            "kafka.topic": target, **(REQUIRED if exactly_once else {})}}
        return entry, os.environ["KAFKA_BOOTSTRAP_SERVERS"], target


class CloudSource(Row):
    counter: PubSubCounter

    def prepare(self) -> None:
        pass  # each row's subscription is preloaded when the row starts: the endpoint makes messages as it serves

    @contextmanager
    def environment(self) -> Iterator[None]:
        emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
        with running_counter() as self.counter:
            os.environ["PUBSUB_EMULATOR_HOST"] = self.counter.endpoint  # the run's clients point at it
            try:
                yield
            finally:
                if emulator is None:
                    os.environ.pop("PUBSUB_EMULATOR_HOST", None)
                else:
                    os.environ["PUBSUB_EMULATOR_HOST"] = emulator

    def bridge(self, exactly_once: bool, round_no: int) -> tuple[dict, str, str]:
        target = kafka_topic(unique_name("eos-tp-csrc"), PARTITIONS)
        self.counter.preload(f"projects/{PROJECT}/subscriptions/{target}", self.records, SIZE)
        entry = {"name": _bridge_name("eos_throughput_cloud_source"), "connector": "CloudPubSubSourceConnector",
                 "config": {"cps.project": PROJECT, "cps.subscription": target, "kafka.topic": target,
                            **(REQUIRED if exactly_once else {})}}
        return entry, os.environ["KAFKA_BOOTSTRAP_SERVERS"], target


def _bridge_name(kind: str) -> str:
    """A name of its own per row: a bridge's consumer group, positions topic and slots are named by it, and a row
    must not resume from the one before."""
    return f"{kind}_{unique_name('row').split('-')[1]}"


def _target() -> str:
    return os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]


def _fill_lite(topic, records: int, processes: int = 2) -> None:
    """`records` messages of SIZE bytes from `processes` publishing processes: one Python publisher takes about
    5,400 a second here (3 million in 554 s), its own CPU the limit."""
    spawn = multiprocessing.get_context("spawn")  # the parent holds gRPC threads: no fork
    share = -(-records // processes)
    workers = [spawn.Process(target=publish_lite, args=(str(topic), min(share, records - i * share), SIZE))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError("a publisher filling the Lite topic failed (see its traceback above)")


def drain_row(row: Row, remote: str, engine_pid: int, exactly_once: bool, round_no: int, lead_s: float,
              seconds: float) -> dict:
    """One bridge on its backlog: the records committed over `seconds`, after `lead_s` of moving."""
    entry, bootstrap_servers, topic = row.bridge(exactly_once, round_no)
    with continuous_run(entry, remote) as run:
        deadline = time.monotonic() + 120
        while topic_records(bootstrap_servers, topic, "read_committed") == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing reached {topic} within 120 s of the bridge starting")
            time.sleep(0.2)
        time.sleep(lead_s)
        with TreeCpu(run.pid, engine_pid) as cpu:
            first, started = topic_records(bootstrap_servers, topic, "read_committed"), time.monotonic()
            last, ended = first, started
            # The window ends early when the backlog nearly ran out: a Lite backlog that outlasts every row would
            # not fit in this machine's memory (the local Lite server keeps messages in memory).
            while ended - started < seconds and last < row.records * NEARLY_OUT:
                time.sleep(min(1.0, seconds - (ended - started)))
                last, ended = topic_records(bootstrap_servers, topic, "read_committed"), time.monotonic()
            cpu_s = cpu.seconds()
    delete_kafka_topic(bootstrap_servers, topic)
    moved = last - first
    if ended - started < seconds / 2:
        raise RuntimeError(f"the backlog of {row.records:,} records nearly ran out within {ended - started:.0f} s: "
                           "pass a larger --records")
    return {"records": moved, "seconds": round(ended - started, 2), "rate_per_s": round(moved / (ended - started)),
            "cpu_per_100k": round(cpu_s / max(moved, 1) * 100_000, 2), "records_in_target": last}


ROWS: dict[str, type[Row]] = {
    "KafkaSinkConnector": KafkaSink,
    "PubSubLiteSourceConnector": LiteSource,
    "CloudPubSubSourceConnector": CloudSource,
}


def _line(row: dict) -> str:
    return f"{row['rate_per_s']:,} records/s over {row['seconds']} s, {row['cpu_per_100k']:.2f} CPU s per 100k"


def cost(sides: dict[str, list[dict]]) -> float:
    """Exactly once's throughput cost: 1 - (its median rate / at least once's), in percent."""
    at_least, exactly = (statistics.median(r["rate_per_s"] for r in sides[side]) for side in SIDES)
    return round((1 - exactly / at_least) * 100, 1)


def render(results: dict) -> list[str]:
    """The docs' table: each connector's median rate over the rounds (spread in brackets) and the cost."""
    lines = ["| bridge (always on) | at least once, records/s | exactly once, records/s | cost | CPU s per 100k "
             "(at least / exactly) | rounds |", "| --- | --- | --- | --- | --- | --- |"]
    for connector, sides in results["rows"].items():
        cells = []
        for side in SIDES:
            rates = sorted(r["rate_per_s"] for r in sides[side])
            cells.append(f"{statistics.median(rates):,.0f} ({rates[0]:,}–{rates[-1]:,})")
        cpu = " / ".join(f"{statistics.median(r['cpu_per_100k'] for r in sides[side]):.2f}" for side in SIDES)
        lines.append(f"| {connector} | {cells[0]} | {cells[1]} | {cost(sides)} % | {cpu} | {len(sides[SIDES[0]])} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--lead-seconds", type=float, default=3)
    parser.add_argument("--records", type=int, help="each row's backlog (default: by connector, 5 or 8 million)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated connector names")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "exactly_once_throughput.json"))
    args = parser.parse_args()
    chosen = [c for c in ROWS if not args.only or c in args.only.split(",")]
    out = Path(args.out)
    # With --only, the other connectors' rows of an earlier run stay in the file (each row carries its date).
    earlier = json.loads(out.read_text())["rows"] if args.only and out.exists() else {}
    results: dict = {"cores": os.cpu_count(), "size": SIZE, "seconds": args.seconds,
                     "lead_seconds": args.lead_seconds, "nearly_out": NEARLY_OUT,
                     "rows": {c: rows for c, rows in earlier.items() if c not in chosen}}
    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        engine_pid = {s.name: s.pid for s in stack.status()}["spark"]
        for connector in chosen:
            print(f"{connector}: filling its source ...", flush=True)
            row = ROWS[connector](args.records, args.rounds)
            started = time.monotonic()
            row.prepare()
            print(f"  filled in {time.monotonic() - started:.0f} s", flush=True)
            with row.environment():
                results["rows"][connector] = alternating_rounds(args.rounds, {
                    side: lambda round_no, eos=(side == SIDES[1]): drain_row(
                        row, remote, engine_pid, eos, round_no, args.lead_seconds, args.seconds)
                    for side in SIDES}, lambda line: print(line, flush=True), describe=_line)
            results["rows"][connector]["cost_percent"] = cost(results["rows"][connector])
            results["rows"][connector]["date"] = datetime.date.today().isoformat()
            write_results(out, results)  # after each connector: a later one's failure keeps it
    print("\n".join(render(results)))


if __name__ == "__main__":
    main()
