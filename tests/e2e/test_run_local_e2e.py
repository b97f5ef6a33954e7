"""`bridgectl dev`, the product's local command, as a user runs it: output piped through `tee`, ended by
Ctrl-C (the terminal's SIGINT reaches every process of the pipeline, tee first among them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # after the name: state, ppid, pgrp, session
                members.append(int(entry.name))
    return members


def _dagster_dev_pid(port: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"dev" in argv and str(port).encode() in argv and any(a.endswith(b"dagster") for a in argv):
                return int(entry.name)
    return None


def _text_at(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()
    except OSError:
        return ""


def test_ctrl_c_with_piped_output_stops_dagster_dev_and_all_it_started(stack, tmp_path, unique):
    port = _free_port()
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [{
        "name": f"piped_{unique}", "connector": "CloudPubSubSinkConnector", "mode": "batch",
        "sensor": {"enabled": False},
        "config": {"topics": "demo.orders", "cps.project": "local-project", "cps.topic": "demo-orders"}}]}))
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    env = {**os.environ, "BRIDGE_STACK_HOME": str(stack.home), "DAGSTER_HOME": str(dagster_home),
           "BRIDGES_FILE": str(bridges)}
    bridgectl = shutil.which("bridgectl", path=os.path.dirname(sys.executable))
    out = tmp_path / "out.log"
    pipeline = subprocess.Popen(["bash", "-c", f"{bridgectl} dev --port {port} --rate 1 2>&1 | tee {out}"],
                                env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, out.read_text()
                time.sleep(1)
        dagster_dev = _dagster_dev_pid(port)
        assert dagster_dev is not None
        metrics = f"http://127.0.0.1:{stack.ports()['metrics']}/metrics"
        deadline = time.monotonic() + 60  # the endpoint starts once the UI answers
        while f'bridge_records_delivered_total{{bridge="piped_{unique}"' not in _text_at(metrics):
            # the endpoint serves the dev instance's bridges
            assert time.monotonic() < deadline, (f"{out.read_text()}\nits log:\n"
                                                 f"{(stack.home / 'logs' / 'bridge-metrics.log').read_text()[-3000:]}")
            time.sleep(1)

        os.killpg(pipeline.pid, signal.SIGINT)  # Ctrl-C in the terminal
        pipeline.wait(timeout=30)
        deadline = time.monotonic() + 90
        while _session_members(dagster_dev) and time.monotonic() < deadline:
            time.sleep(1)
        assert _session_members(dagster_dev) == []  # dagster dev, its daemon, webserver and code server
        text = out.read_text()
        assert f"Dagster UI: http://127.0.0.1:{port}" in text
        assert f"metrics: {metrics}, scraped by Prometheus at {stack.prometheus_url()}" in text
        assert _text_at(metrics) == ""  # the metrics endpoint stopped with the rest
        assert "SupersessionWarning" not in text and "SensorDaemon" not in text
        assert (stack.home / "dagster-dev.log").stat().st_size > 0  # dagster dev's output, also after tee died
    finally:
        if pipeline.poll() is None:
            os.killpg(pipeline.pid, signal.SIGKILL)


def test_a_metrics_endpoint_that_cannot_listen_is_told_in_one_line(tmp_path):
    """What `bridgectl dev` says when the endpoint it started ends (here: its port taken): the endpoint's own last
    line, not a silent UI without metrics."""
    from bridgectl.cli import _metrics_ended, _metrics_log
    from local_stack.stack import LocalStack

    stack = LocalStack(home=tmp_path / "stack")
    _metrics_log(stack).parent.mkdir(parents=True)
    (tmp_path / "dagster_home").mkdir()
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text("bridges: []\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with open(_metrics_log(stack), "ab") as log:
            code = subprocess.run([sys.executable, "-m", "bridge_metrics", "--port", str(taken.getsockname()[1]),
                                   "--bridges-file", str(bridges)], stdout=log, stderr=subprocess.STDOUT, timeout=60,
                                  env={**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")},
                                  cwd=Path(__file__).resolve().parents[2]).returncode
    said = _metrics_ended(stack, code)
    assert said.startswith(f"the metrics endpoint ended (exit {code}): OSError: [Errno 98] Address already in use"), said
    assert code != 0 and "\n" not in said
