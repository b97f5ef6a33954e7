"""Does the warm engine stay flat over many runs?

Runs the demo's bridges in turn, each run its own `dagster asset materialize` process as a Dagster run
is, against the local stack's Spark Connect server, with the demo traffic flowing; counts the server's
processes (its JVM and Python workers) and their resident memory after the first run, every 20 runs and after the
last. Writes bench/engine_resources.json.

    bridgectl local up && python -m bench.engine_resources --runs 200
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.common import write_results
from bench.process_memory import tree, tree_rss_by_kind
from local_stack.demo import TrafficGenerator, create_demo_resources
from local_stack.stack import LocalStack
from local_stack.paths import PROJECT_ROOT

RESULTS = Path(__file__).with_name("engine_resources.json")


def _python_workers(pids: list[int]) -> int:
    """Spark's Python daemon and the workers it forked (the JVM's command line names pyspark's jars too)."""
    from connectors.spark_session import PYTHON_DAEMON_MODULE

    count = 0
    for pid in pids:
        try:
            if f"-m\0{PYTHON_DAEMON_MODULE}\0".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                count += 1
        except OSError:
            continue
    return count


def sample(server_pid: int) -> dict:
    pids = tree(server_pid)
    rss = tree_rss_by_kind(server_pid)
    return {"processes": len(pids), "python_workers": _python_workers(pids),
            "jvm_mb": round(rss["jvm"] / 2**20), "python_mb": round(rss["python"] / 2**20)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    stack = LocalStack()
    server = next((s for s in stack.status() if s.name == "spark"), None)
    if server is None or not server.running:
        sys.exit("the local stack is not running: bridgectl local up")
    os.environ.update(stack.env())  # the demo's clients read the emulator endpoints from it
    env = dict(os.environ)
    create_demo_resources(env["KAFKA_BOOTSTRAP_SERVERS"])
    bridges = [b["name"] for b in yaml.safe_load((PROJECT_ROOT / "bridges.yaml").read_text())["bridges"]]
    traffic = TrafficGenerator(env["KAFKA_BOOTSTRAP_SERVERS"], 20, env["SCHEMA_REGISTRY_URL"])
    traffic.start()
    dagster = str(Path(sys.executable).parent / "dagster")
    with tempfile.TemporaryDirectory() as home:
        env["DAGSTER_HOME"] = home
        samples, failed, started = {}, 0, time.monotonic()
        try:
            for i in range(args.runs):
                name = bridges[i % len(bridges)]
                result = subprocess.run([dagster, "asset", "materialize", "-m", "bridge_assets", "--select", name],
                                        env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
                if result.returncode != 0:
                    failed += 1
                    print(f"run {i + 1} ({name}) failed: {' | '.join(result.stderr.strip().splitlines()[-3:])[-600:]}",
                          flush=True)
                if i == 0 or (i + 1) % 20 == 0 or i == args.runs - 1:
                    samples[str(i + 1)] = sample(server.pid)
                if (i + 1) % 20 == 0:
                    print(f"{i + 1} runs, {failed} failed, {time.monotonic() - started:.0f} s; "
                          f"engine now {samples[str(i + 1)]}", flush=True)
        finally:
            traffic.stop()
    results = {"runs": args.runs, "bridges": len(bridges), "failed": failed,
               "seconds": round(time.monotonic() - started), "samples": samples}
    write_results(RESULTS, results)
    print(render(results))


def render(results: dict) -> str:
    """The engine's processes and memory after the first run, every 20 runs and the last."""
    lines = [f"{results['runs']} runs of the {results['bridges']} demo bridges in turn, each its own `dagster asset "
             f"materialize` process, in {results['seconds']:,} s; {results['failed']} failed.", "",
             "| after run | processes | Python workers | JVM RSS (MB) | Python RSS (MB) |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for run, s in results["samples"].items():
        lines.append(f"| {run} | {s['processes']} | {s['python_workers']} | {s['jvm_mb']} | {s['python_mb']} |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
