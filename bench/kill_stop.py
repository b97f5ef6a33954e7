"""How long a killed run's work goes on: a Kafka -> Kafka bridge (KafkaSinkConnector) run as a user runs it
(`dagster asset materialize`; always on, `dagster job execute -j <bridge>_job`), its process group killed -9 while
it moves records; the time from the kill to the last record the killed run's work wrote to the target (the target
broker's LogAppendTime; one clock, this machine's), and how many it wrote after the kill. Each mode on each engine,
`--rounds` times:

- continuous (an always-on stream, a steady 1,000 records/s): its tasks stop when the run's lease lapses;
- batch (a backlog of 300,000 records of 1 KiB, killed about a second into its arrivals): on the warm engine its
  tasks stop when the batch's lease lapses (its watchdog interrupts the job too, later); on the classic engine the
  job dies with the run's process;
- source-batch: a Cloud Pub/Sub source batch (CloudPubSubSourceConnector, seed defaults) of a 60,000-message
  backlog into a Kafka topic of the stack's own cluster, killed about a second into its arrivals; the same lease;
- lite-source-batch: the same with the Pub/Sub Lite source, a backlog of 300,000 messages on the stack's Lite server;
- cloud-sink-batch: a Cloud Pub/Sub sink batch (CloudPubSubSinkConnector, seed defaults) of the Kafka backlog into
  the counting Pub/Sub endpoint (bench.pubsub_counter), killed about a second into its arrivals; the last publish
  the endpoint counted ends it (pstest's 40,000/s would pace the batch instead).

    python -m bench.kill_stop [--rounds 3] [--modes continuous,batch,source-batch,lite-source-batch,cloud-sink-batch]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import yaml

from bench.common import bench_stack, fresh_pubsub, median_spread, write_results
from bench.continuous import produce_steady
from bench.data import (
    LITE_LOCATION, PROJECT, kafka_topic, lite_topic, publish_lite, publish_pubsub, pubsub_topic, unique_name,
)
from bench.pubsub_counter import PubSubCounter, running_counter
from local_stack.paths import PROJECT_ROOT

PARTITIONS = 4
BACKLOG, RECORD_BYTES = 300_000, 1024
# pstest scans its whole backlog on every pull: a larger one measures the emulator.
SOURCE_BACKLOG = 60_000


class TargetArrivals(threading.Thread):
    """When each record was written to the target topic: its broker's append time (the topic is made with
    LogAppendTime), read by a consumer polling it until stopped."""

    def __init__(self, topic: str, bootstrap_servers: str):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap_servers,
                                  "group.id": "kill-stop", "enable.auto.commit": False, "log_level": 3})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.times: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            got = [m for m in self.consumer.consume(10_000, timeout=0.05) if m.error() is None]
            self.times += [m.timestamp()[1] / 1000 for m in got]
        self.consumer.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(10)


def _start_run(name: str, topic: str, mode: str, remote: str | None, work: Path) -> subprocess.Popen:
    entry = {"name": name, "connector": "KafkaSinkConnector", "mode": "batch",
             "config": {"topics": topic, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
                        "emit.checkpoints.enabled": "false"},
             "batch": {"initial_offsets": "earliest", "max_records": BACKLOG}}
    if mode == "source-batch":  # the subscription has the topic's name (bench.data.pubsub_topic)
        entry = {"name": name, "connector": "CloudPubSubSourceConnector", "mode": "batch",
                 "config": {"cps.project": PROJECT, "cps.subscription": topic, "kafka.topic": topic},
                 "batch": {"max_records": SOURCE_BACKLOG}}
    if mode == "lite-source-batch":  # the same for bench.data.lite_topic
        entry = {"name": name, "connector": "PubSubLiteSourceConnector", "mode": "batch",
                 "config": {"pubsublite.project": PROJECT, "pubsublite.location": LITE_LOCATION,
                            "pubsublite.subscription": topic, "kafka.topic": topic},
                 "batch": {"max_records": BACKLOG}}
    if mode == "cloud-sink-batch":  # to the Pub/Sub topic of the same name on the counting endpoint
        entry = {"name": name, "connector": "CloudPubSubSinkConnector", "mode": "batch",
                 "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic},
                 "batch": {"initial_offsets": "earliest", "max_records": BACKLOG}}
    if mode == "continuous":
        entry |= {"mode": "continuous", "continuous": {"commit_interval_ms": 5000, "max_run_minutes": 10, "host": None}}
    (work / "bridges.yaml").write_text(yaml.safe_dump({"bridges": [entry]}))
    home = work / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "BRIDGES_FILE": str(work / "bridges.yaml"), "DAGSTER_HOME": str(home)}
    env.pop("BRIDGE_SPARK_REMOTE", None)
    if remote:
        env["BRIDGE_SPARK_REMOTE"] = remote
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    command = ([dagster, "job", "execute", "-m", "bridge_assets", "-j", f"{name}_job"] if mode == "continuous"
               else [dagster, "asset", "materialize", "-m", "bridge_assets", "--select", name])
    return subprocess.Popen(command, env=env, cwd=PROJECT_ROOT,
                            stdout=open(work / "run.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _wait(condition, what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting until {what}")
        time.sleep(0.05)


def _killed_run(name: str, topic: str, mode: str, remote: str | None, moving: Callable[[], bool], what: str,
                then_s: float, at_kill: Callable[[], object] = lambda: None) -> tuple[float, object]:
    """Starts the run, and `then_s` after `moving()` holds kills its process group -9; returns the kill's time and
    `at_kill()` taken right after it, once any orphan work had time to end."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        run = _start_run(name, topic, mode, remote, Path(tmp))
        try:
            _wait(moving, what)
            time.sleep(then_s)
            assert run.poll() is None, (Path(tmp) / "run.log").read_text()[-3000:]
            os.killpg(run.pid, signal.SIGKILL)
            killed_at, seen = time.time(), at_kill()
            run.wait()
            time.sleep(15)  # longer than any orphan work lasts (the lease lapses in 0.7 s, the watchdog in seconds)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    return killed_at, seen


def cloud_sink_kill_round(counter: PubSubCounter, remote: str | None) -> dict:
    """One killed Cloud sink batch: seconds from the kill to the last publish the counting endpoint counted, and the
    messages counted after it (the endpoint's count has no time of its own per message)."""
    name, topic = unique_name("kill").replace("-", "_"), unique_name("kill")
    kafka_topic(topic, PARTITIONS, BACKLOG, RECORD_BYTES)
    pubsub_topic(topic, subscribe=False)
    before = counter.stats()["published"]["messages"]
    killed_at, at_kill = _killed_run(
        name, topic, "cloud-sink-batch", remote, lambda: counter.stats()["published"]["messages"] > before,
        "the batch's first messages arrived", 1.0, lambda: counter.stats()["published"]["messages"])
    published = counter.stats()["published"]
    last = published["last_unix_ns"] / 1e9
    return {"stopped_after_s": round(max(0.0, last - killed_at), 2),
            "written_after_kill": published["messages"] - at_kill, "written_before_kill": at_kill - before}


def kill_round(mode: str, remote: str | None) -> dict:
    """One killed run: seconds from the kill to the last record its work wrote, and the records written after it."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    name = unique_name("kill").replace("-", "_")
    if mode == "source-batch":  # Pub/Sub -> the stack's own Kafka
        topic, target = unique_name("kill"), os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        fresh_pubsub()
        pubsub_path, _ = pubsub_topic(topic)
        publish_pubsub(pubsub_path, SOURCE_BACKLOG, RECORD_BYTES)
    elif mode == "lite-source-batch":  # Pub/Sub Lite -> the stack's own Kafka
        topic, target = unique_name("kill"), os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        lite_path, _ = lite_topic(topic, PARTITIONS)
        publish_lite(lite_path, BACKLOG, RECORD_BYTES)
    else:
        topic = kafka_topic(unique_name("kill"), PARTITIONS, BACKLOG if mode == "batch" else 0, RECORD_BYTES)
        target = os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
    KafkaAdmin(KafkaConnection(target)).create_topic(topic, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    arrivals = TargetArrivals(topic, target)
    arrivals.start()
    halt = threading.Event()
    sender = threading.Thread(target=lambda: [produce_steady(topic, 1000, 1) for _ in iter(halt.is_set, True)],
                              daemon=True)
    try:
        if mode == "continuous":
            sender.start()
            killed_at, _ = _killed_run(name, topic, mode, remote, lambda: len(arrivals.times) >= 3000,
                                       "three seconds of records arrived", 0.0)
        else:
            killed_at, _ = _killed_run(name, topic, mode, remote, lambda: len(arrivals.times) > 0,
                                       "the batch's first records arrived", 1.0)
    finally:
        halt.set()
    arrivals.stop()
    after = [t for t in arrivals.times if t > killed_at]
    # Written in each tenth of a second after the kill: a rate that holds until the end is the tasks going on until
    # they noticed; a tail that thins out is what they had handed the target still arriving.
    by_tenth = [0] * (int((max(after) - killed_at) * 10) + 1 if after else 0)
    for t in after:
        by_tenth[int((t - killed_at) * 10)] += 1
    return {"stopped_after_s": round(max(after) - killed_at, 2) if after else 0.0, "written_after_kill": len(after),
            "written_by_tenth_s": by_tenth}


@contextlib.contextmanager
def _counting_endpoint() -> Iterator[PubSubCounter]:
    """The counting Pub/Sub endpoint as this process's and its runs' Pub/Sub until the block ends (pstest again after)."""
    before = os.environ.get("PUBSUB_EMULATOR_HOST")
    with running_counter() as counter:
        os.environ["PUBSUB_EMULATOR_HOST"] = counter.endpoint
        try:
            yield counter
        finally:
            if before is None:
                os.environ.pop("PUBSUB_EMULATOR_HOST", None)
            else:
                os.environ["PUBSUB_EMULATOR_HOST"] = before


def mode_rows(mode: str, remote: str, rounds: int) -> dict[str, dict]:
    """`rounds` killed runs of `mode` on each engine."""
    rows = {}
    with _counting_endpoint() if mode == "cloud-sink-batch" else contextlib.nullcontext() as counter:
        for engine, url in (("connect", remote), ("classic", None)):
            killed = []
            for i in range(rounds):
                print(f"kill -9 of a {mode} run on the {engine} engine, round {i + 1} ...", flush=True)
                killed.append(cloud_sink_kill_round(counter, url) if counter else kill_round(mode, url))
                print(f"  {killed[-1]}", flush=True)
            stops = [r["stopped_after_s"] for r in killed]
            rows[f"{mode}, {engine}"] = {"rounds": killed, "median_s": statistics.median(stops), "max_s": max(stops)}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="continuous,batch,source-batch,lite-source-batch,cloud-sink-batch",
                        help="comma list of continuous, batch, source-batch, lite-source-batch, cloud-sink-batch")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "kill_stop.json"))
    args = parser.parse_args()
    results: dict = {"rounds": args.rounds, "rows": {}}
    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        for mode in [m.strip() for m in args.modes.split(",")]:
            results["rows"] |= mode_rows(mode, remote, args.rounds)
            write_results(Path(args.out), results)  # each mode's rows as they are measured
    print(json.dumps(results, indent=1))



def render(results: dict) -> str:
    """Each mode and engine: from the kill to the last record its work wrote, and how many it wrote after the kill,
    medians (min-max) of the kills; a results file of several runs (`runs`, each with its `code`) a row per run."""
    runs = results.get("runs") or [{"rows": results["rows"]}]
    lines = ["| mode, engine | kills | kill -> last record written (s) | records written after the kill |",
             "| --- | --- | --- | --- |"]
    for run in runs:
        for name, row in run["rows"].items():
            label = f"{name} ({run['code']})" if run.get("code") else name
            stops = [r["stopped_after_s"] for r in row["rounds"]]
            written = [r["written_after_kill"] for r in row["rounds"]]
            lines.append(f"| {label} | {len(stops)} | {median_spread(stops, '{:.2f}')} | {median_spread(written)} |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
