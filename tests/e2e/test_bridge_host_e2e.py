"""Bridges sharing a host (`continuous.host`) under `dagster dev`, as a user runs them: one run moves all three
Kafka -> Pub/Sub bridges; one switched off (`bridgectl bridges stop`) ends in that run after recording its commit
while the others go on moving; switched on again, it joins the same run and moves what waited. Each bridge keeps
its own position: nothing lost, nothing copied. A poison record fails its bridge alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from bridgectl.paths import PROJECT_ROOT
from tests.e2e.helpers import PROJECT, answers, create_pubsub_topic, drain, free_port, kafka_admin, produce, wait

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
STRINGS = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
JSON = {"value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": False}


def _recorded_offsets(home: Path, name: str) -> int | None:
    with DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(AssetKey(name))
    if event is None:
        return None
    return sum(o for parts in event.asset_materialization.metadata["kafka_offsets"].value.values()
               for o in parts.values())


def _value(bridge: int, text: str) -> str:
    return json.dumps(text) if bridge == 2 else text  # bridge 2 reads JSON


def _run_lines(home: Path, run_id: str) -> list[str]:
    with DagsterInstance.from_config(str(home)) as instance:
        return [e.user_message for e in instance.all_logs(run_id) if not e.is_dagster_event]


def _runs(home: Path, statuses) -> list:
    with DagsterInstance.from_config(str(home)) as instance:
        return instance.get_runs(RunsFilter(statuses=statuses))


def test_three_bridges_share_one_run_and_are_switched_off_and_on_alone(stack, spark_remote, tmp_path, unique):
    host = f"h_{unique}"
    names = [f"hosted_{i}_{unique}" for i in range(3)]
    topics = [f"hosted-{i}-{unique}" for i in range(3)]
    subscriptions = []
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=2)
        subscriptions.append(create_pubsub_topic(topic))
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [
        {"name": name, "connector": "CloudPubSubSinkConnector", "mode": "continuous",
         "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic, **converter},
         "batch": {"initial_offsets": "earliest"}, "sensor": {"interval_seconds": 2},
         "continuous": {"host": host, "commit_interval_ms": 1000}}
        for name, topic, converter in zip(names, topics, [STRINGS, STRINGS, JSON])]}))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "BRIDGES_FILE": str(bridges), "DAGSTER_HOME": str(home), "BRIDGE_SPARK_REMOTE": spark_remote,
           "DAGSTER_URL": url}
    dev = subprocess.Popen([str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p",
                            url.rsplit(":", 1)[1]], cwd=PROJECT_ROOT, env=env, stdout=open(tmp_path / "dev.log", "wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    received: dict[str, list[str]] = {name: [] for name in names}

    def arrived(i: int) -> list[str]:
        received[names[i]] += [m.data.decode() for m in drain(subscriptions[i])]
        return received[names[i]]

    def bridgectl(*args: str, stdout_only: bool = False) -> str:
        done = subprocess.run([str(BIN / "bridgectl"), "bridges", *args], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout if stdout_only else done.stdout + done.stderr  # --json goes to stdout alone

    try:
        wait(lambda: answers(url), "dagster dev answers")
        first = {i: [f"first-{i}-{n}" for n in range(50)] for i in range(3)}
        for i in range(3):
            produce(topics[i], [(None, _value(i, v)) for v in first[i]])
        for i in range(3):
            wait(lambda: sorted(arrived(i)) == sorted(first[i]), f"bridge {i}'s first records arrived", 180)
        [run] = _runs(home, [DagsterRunStatus.STARTED])  # one run moves all three
        assert run.tags.get("bridge-host") == host

        # Switched off: bridge 1 ends in that run, its position recorded; the others go on.
        assert "stopped" in bridgectl("stop", names[1])
        wait(lambda: "hosted_1" in (tmp_path / "dev.log").read_text() and _recorded_offsets(home, names[1]) == 50,
             "the switched-off bridge recorded its last commit")
        time.sleep(4)  # past the run's look at its switches and the stream's stop
        second = {i: [f"second-{i}-{n}" for n in range(30)] for i in range(3)}
        for i in range(3):
            produce(topics[i], [(None, _value(i, v)) for v in second[i]])
        for i in (0, 2):
            wait(lambda: sorted(arrived(i)) == sorted(first[i] + second[i]), f"bridge {i} kept moving")
        time.sleep(3)
        assert sorted(arrived(1)) == sorted(first[1]), "the switched-off bridge moved records"

        # Switched on again: it joins the same run and moves what waited.
        assert "running" in bridgectl("start", names[1])
        wait(lambda: sorted(arrived(1)) == sorted(first[1] + second[1]), "the switched-on bridge caught up")
        assert [r.run_id for r in _runs(home, [DagsterRunStatus.STARTED])] == [run.run_id]
        for i in range(3):
            wait(lambda: _recorded_offsets(home, names[i]) == 80, f"bridge {i}'s position is recorded")
        with DagsterInstance.from_config(str(home)) as instance:
            assert {instance.get_latest_materialization_event(AssetKey(n)).run_id for n in names} == {run.run_id}

        # A record bridge 2 cannot convert (errors.tolerance none) fails bridge 2 alone: the run says so, starts it
        # again later and later, and bridge 0 goes on moving in the same run (in the same shared Spark job).
        produce(topics[2], [(None, "{malformed")])
        wait(lambda: any(names[2] in line and "starts again in" in line for line in _run_lines(home, run.run_id)),
             "the run reported bridge 2's failure")
        third = [f"third-0-{n}" for n in range(20)]
        produce(topics[0], [(None, v) for v in third])
        wait(lambda: sorted(arrived(0)) == sorted(first[0] + second[0] + third), "bridge 0 kept moving")
        assert [r.run_id for r in _runs(home, [DagsterRunStatus.STARTED])] == [run.run_id]
        assert sorted(arrived(2)) == sorted(first[2] + second[2])  # nothing past the poison record
        [status] = json.loads(bridgectl("status", names[2], "--json", stdout_only=True))
        assert status["sensor"] == "RUNNING" and status["last_run"]["run_id"] == run.run_id
        assert names[2] in status["last_error"]["message"]
    finally:
        os.killpg(dev.pid, signal.SIGINT)
        try:
            dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
