"""Run overhead and end-to-end latency of a Cloud Pub/Sub sink bridge, as users run it.

- overhead: `dagster asset materialize` started with one record waiting; seconds from the start of
  the command to the record's arrival in Pub/Sub (and to the command's end);
- continuous: the Dagster daemon runs the bridge's sensor and launches runs (the product's own
  `dagster_home/dagster.yaml`), while a producer writes timestamped records at a steady rate;
  latency is the time from produce to arrival at the subscription, p50 and p95.
"""

from __future__ import annotations

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

import yaml

from bench.common import fresh_pubsub
from bench.data import kafka_topic, pubsub_topic, unique_name
from local_stack.paths import PROJECT_ROOT


def _bridge_env(workdir: Path, engine: str, remote: str, topic: str) -> tuple[dict[str, str], str]:
    name = unique_name("latency").replace("-", "_")  # an asset name: letters, digits, underscores
    (workdir / "bridges.yaml").write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "CloudPubSubSinkConnector", "mode": "batch",
        "config": {"topics": topic, "cps.project": "bench", "cps.topic": topic,
                   "value.converter": "org.apache.kafka.connect.storage.StringConverter"},
        "batch": {"initial_offsets": "earliest"},
        "sensor": {"interval_seconds": 1},
    }]}))
    home = workdir / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "BRIDGES_FILE": str(workdir / "bridges.yaml"), "DAGSTER_HOME": str(home)}
    env.pop("BRIDGE_SPARK_REMOTE", None)
    if engine == "connect":
        env["BRIDGE_SPARK_REMOTE"] = remote
    return env, name


def _dagster(tool: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), tool)


class _Arrivals(threading.Thread):
    """Pulls the subscription and records (arrival time - time written in the message)."""

    def __init__(self, subscription: str):
        super().__init__(daemon=True)
        from google.cloud import pubsub_v1

        self._subscriber = pubsub_v1.SubscriberClient()
        self._subscription = subscription
        self.latencies: list[float] = []
        self.first_arrival: float | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            response = self._subscriber.pull(subscription=self._subscription, max_messages=100, timeout=10)
            now = time.time()
            if not response.received_messages:
                self._halt.wait(0.1)
                continue
            self._subscriber.acknowledge(subscription=self._subscription,
                                         ack_ids=[m.ack_id for m in response.received_messages])
            for received in response.received_messages:
                self.latencies.append(now - float(received.message.data.decode()))
            self.first_arrival = self.first_arrival or now

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


def _produce_now(topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    producer.produce(topic, value=repr(time.time()).encode())
    assert producer.flush(10) == 0


def run_overhead(engine: str, remote: str, repeats: int = 3) -> dict:
    """Medians over `repeats` runs of: start -> first record delivered, start -> run finished."""
    fresh_pubsub()
    topic = kafka_topic(unique_name("overhead"), 1)
    _, subscription = pubsub_topic(topic)
    first, total = [], []
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        env, name = _bridge_env(Path(tmp), engine, remote, topic)
        command = [_dagster("dagster"), "asset", "materialize", "-m", "bridge_assets", "--select", name]
        for _ in range(repeats):
            arrivals = _Arrivals(subscription)
            arrivals.start()
            _produce_now(topic)
            started = time.time()
            subprocess.run(command, env=env, cwd=PROJECT_ROOT, check=True, capture_output=True)
            ended = time.time()
            deadline = time.time() + 30
            while arrivals.first_arrival is None and time.time() < deadline:
                time.sleep(0.05)
            arrivals.stop()
            first.append(arrivals.first_arrival - started)
            total.append(ended - started)
    return {"first_record_s": round(statistics.median(first), 2), "run_s": round(statistics.median(total), 2)}


def continuous_latency(engine: str, remote: str, seconds: float = 90, rate_per_s: float = 2,
                       warmup_s: float = 20) -> dict:
    """p50/p95 of produce -> arrival with the daemon starting runs from the lag sensor."""
    fresh_pubsub()
    topic = kafka_topic(unique_name("latency"), 2)
    _, subscription = pubsub_topic(topic)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        env, _ = _bridge_env(Path(tmp), engine, remote, topic)
        workspace = Path(tmp) / "workspace.yaml"
        workspace.write_text(yaml.safe_dump({"load_from": [{"python_module": {
            "module_name": "bridge_assets", "working_directory": str(PROJECT_ROOT)}}]}))
        log = open(Path(tmp) / "daemon.log", "wb")
        daemon = subprocess.Popen([_dagster("dagster-daemon"), "run", "-w", str(workspace)], env=env,
                                  cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        arrivals = _Arrivals(subscription)
        arrivals.start()
        try:
            time.sleep(warmup_s)  # the daemon loads the code location and evaluates its first ticks
            from confluent_kafka import Producer

            producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3,
                                 "linger.ms": 0})
            sent, started = 0, time.time()
            while time.time() - started < seconds:
                producer.produce(topic, value=repr(time.time()).encode())
                producer.poll(0)
                sent += 1
                time.sleep(1 / rate_per_s)
            producer.flush(10)
            deadline = time.time() + 60
            while len(arrivals.latencies) < sent and time.time() < deadline:
                time.sleep(0.5)
        finally:
            arrivals.stop()
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
            log.close()
    latencies = arrivals.latencies
    assert len(latencies) >= sent, f"{len(latencies)} of {sent} records arrived"
    cuts = statistics.quantiles(latencies, n=20)
    return {"p50_s": round(statistics.median(latencies), 2), "p95_s": round(cuts[18], 2),
            "max_s": round(max(latencies), 2), "records": sent}
