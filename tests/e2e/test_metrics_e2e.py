"""The bridges' metrics where operators look: the metrics endpoint (`python -m bridge_metrics`, its own process)
read by the stack's real Prometheus, for a batch sink and a continuous source; the series are read back through
Prometheus's HTTP API, and the alert rules and the dashboard's queries run on that same server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from dagster import DagsterInstance, materialize
from google.cloud import pubsub_v1

from bridge_assets.definitions import build_definitions
from local_stack.paths import PROJECT_ROOT
from resources import default_resources
from tests.e2e.helpers import PROJECT, cli_run, create_pubsub_topic, free_port, kafka_admin, produce, wait

pytestmark = pytest.mark.e2e

DASHBOARD = PROJECT_ROOT / "observability" / "grafana" / "bridges-dashboard.json"


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def get(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def value(self, expr: str) -> float | None:
        """The one sample `expr` selects now, or None when it selects nothing."""
        result = self.get("query", query=expr)["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expr: str, expected: float, timeout_s: float = 90) -> None:
        wait(lambda: self.value(expr) == expected, f"{expr} == {expected} (last: {self.value(expr)})", timeout_s)

    def firing(self, alertname: str, bridge: str) -> bool:
        return any(a["labels"].get("alertname") == alertname and a["labels"].get("bridge") == bridge
                   and a["state"] == "firing" for a in self.get("alerts")["alerts"])


@pytest.fixture
def exporter(stack, tmp_path, unique):
    """The metrics endpoint of a bridges file and a Dagster home of this test's, as Prometheus's target."""
    home, bridges_file, port = tmp_path / "dagster_home", tmp_path / "bridges.yaml", free_port()
    home.mkdir()
    target = stack.prometheus_targets() / f"test-{unique}.json"
    process = None

    def start() -> None:
        nonlocal process
        process = subprocess.Popen(
            [sys.executable, "-m", "bridge_metrics", "--port", str(port), "--bridges-file", str(bridges_file),
             "--interval", "1"], env={**os.environ, "DAGSTER_HOME": str(home)}, cwd=PROJECT_ROOT,
            stdout=open(tmp_path / "bridge-metrics.log", "wb"), stderr=subprocess.STDOUT)
        target.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"]}]))

    yield home, bridges_file, start
    target.unlink(missing_ok=True)
    if process is not None:
        process.terminate()
        process.wait(timeout=30)


def test_prometheus_reads_a_sink_and_a_continuous_source_and_fires_the_dead_letter_alert(
        stack, spark_remote, exporter, tmp_path, unique):
    home, bridges_file, start_exporter = exporter
    sink, source = f"metrics_sink_{unique}", f"metrics_source_{unique}"
    topic, dlq, source_topic = f"metrics-{unique}", f"metrics-dlq-{unique}", f"metrics-back-{unique}"
    for name in (topic, dlq, source_topic):
        kafka_admin().create_topic(name, partitions=1)
    create_pubsub_topic(topic)
    subscription = create_pubsub_topic(f"metrics-src-{unique}")
    bridges_file.write_text(yaml.safe_dump({"bridges": [
        {"name": sink, "connector": "CloudPubSubSinkConnector", "mode": "batch",
         "batch": {"max_records": 3}, "checks": {"max_lag": 1},
         "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic,
                    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                    "value.converter.schemas.enable": False, "errors.tolerance": "all",
                    "errors.deadletterqueue.topic.name": dlq}},
        {"name": source, "connector": "CloudPubSubSourceConnector", "mode": "continuous",
         "continuous": {"trigger_interval_ms": 100, "commit_interval_ms": 1000, "max_run_minutes": 3, "host": None},
         "config": {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
                    "kafka.topic": source_topic}},
    ]}))
    prometheus = Prometheus(stack.prometheus_url())
    start_exporter()
    delivered = 'bridge_records_delivered_total{{bridge="{}"}}'.format
    # Before any batch, every counter is there at 0 (an alert on its increase then sees the first one).
    prometheus.wait_for(delivered(sink), 0)
    prometheus.wait_for(f'bridge_records_dead_lettered_total{{bridge="{sink}"}}', 0)

    # The sink, batch mode: a, b, c (2 left, over checks.max_lag), then {bad to the dead-letter topic and e.
    produce(topic, [(None, '"a"'), (None, '"b"'), (None, '"c"'), (None, "{bad"), (None, '"e"')])
    defs = build_definitions(str(bridges_file))
    instance = DagsterInstance.from_config(str(home))
    materialize([defs.get_assets_def(sink)], resources=default_resources(), instance=instance)
    prometheus.wait_for(f'bridge_lag_records{{bridge="{sink}"}}', 2)
    prometheus.wait_for(f'bridge_check_passed{{bridge="{sink}",check="lag_within_bound"}}', 0)
    materialize([defs.get_assets_def(sink)], resources=default_resources(), instance=instance)
    prometheus.wait_for(f'bridge_lag_records{{bridge="{sink}"}}', 0)
    prometheus.wait_for(delivered(sink), 4)
    assert prometheus.value(f'bridge_records_read_total{{bridge="{sink}"}}') == 5
    assert prometheus.value(f'bridge_records_dead_lettered_total{{bridge="{sink}"}}') == 1
    assert prometheus.value(f'bridge_batches_total{{bridge="{sink}"}}') == 2
    assert prometheus.value(f'bridge_batch_duration_seconds_count{{bridge="{sink}"}}') == 2
    # Every record handled has its send-to-arrival latency: produced moments ago, so well under 5 minutes.
    assert prometheus.value(f'bridge_delivery_latency_seconds_count{{bridge="{sink}"}}') == 5
    assert prometheus.value(f'bridge_delivery_latency_seconds_bucket{{bridge="{sink}",le="300.0"}}') == 5
    # The batch's checks are evaluated after its counters move: on a slow machine a scrape between the two read 1.
    prometheus.wait_for(f'bridge_check_passed{{bridge="{sink}",check="no_new_dead_letters"}}', 0)
    wait(lambda: prometheus.firing("BridgeDeadLetters", sink), "the dead-letter alert fires", 60)
    assert not prometheus.firing("BridgeDeadLetters", source)

    # The source, continuous: its commits show while its run is still going, and stay after the run ended.
    publisher = pubsub_v1.PublisherClient()
    topic_path = publisher.topic_path(PROJECT, f"metrics-src-{unique}")
    [f.result() for f in [publisher.publish(topic_path, f"m{i}".encode()) for i in range(200)]]
    command, env = cli_run(tmp_path, str(bridges_file), source, {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)
    run = subprocess.Popen(command, env={**env, "DAGSTER_HOME": str(home)}, start_new_session=True,
                           stdout=open(tmp_path / "source-run.log", "wb"), stderr=subprocess.STDOUT)
    try:
        prometheus.wait_for(delivered(source), 200, timeout_s=180)
        assert run.poll() is None, "the continuous run ended before its figures were read"
        assert prometheus.value(f'bridge_records_read_total{{bridge="{source}"}}') == 200
        os.killpg(run.pid, signal.SIGINT)  # ends after recording its last commit
        assert run.wait(timeout=120) == 0, (tmp_path / "source-run.log").read_text()[-3000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    time.sleep(3)  # the exporter's next read and Prometheus's next scrape
    prometheus.wait_for(delivered(source), 200)  # kept after the run's process ended
    assert prometheus.value(f'bridge_check_passed{{bridge="{source}",check="batch_succeeded"}}') == 1
    assert prometheus.value(f'bridge_runs_failed_total{{bridge="{source}"}}') == 0
    assert prometheus.value(f'bridge_lag_records{{bridge="{source}"}}') is None  # Pub/Sub shows no backlog

    # The rules the stack loaded are ours and healthy, and each dashboard query runs on this Prometheus.
    [group] = [g for g in prometheus.get("rules")["groups"] if g["name"] == "bridges"]
    assert {r["name"] for r in group["rules"]} == {
        "BridgeFailing", "BridgeLagOverBound", "BridgeStale", "BridgeDeadLetters", "BridgeMetricsDown"}
    assert all(r["health"] == "ok" for r in group["rules"]), group["rules"]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    shown = {}
    for panel in panels:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$bridge", f"{sink}|{source}")
            shown[(panel["title"], target["refId"])] = prometheus.get("query", query=expr)["result"]
    assert {r["metric"]["bridge"] for r in shown[("Read per second", "A")]} == {sink, source}
    assert {r["metric"]["bridge"] for r in shown[("Send-to-arrival latency (p50, p99)", "B")]} == {sink}
    assert {r["metric"]["check"] for r in shown[("Checks (1 passed, 0 failed)", "A")]} == {
        "batch_succeeded", "lag_within_bound", "fresh", "no_new_dead_letters"}
