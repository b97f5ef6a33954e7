"""Materialize is one batch in every mode: a bridge that names no mode (always on, in the host `default`)
materialized by hand (`dagster asset materialize`, `dg launch --assets`) moves what is pending at its start and
ends; while its host's run keeps it moving, a materialization is refused in one line that names that run and how to
switch the bridge off."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import yaml

from tests.e2e.helpers import (
    PROJECT, cli_run, create_pubsub_topic, drain, interrupt, kafka_admin, produce, wait,
)
from local_stack.paths import PROJECT_ROOT
from tests.e2e.test_continuous_e2e import recorded_position, start

pytestmark = pytest.mark.e2e

STRINGS = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
           "value.converter": "org.apache.kafka.connect.storage.StringConverter"}


def _always_on_bridge(tmp_path, name: str, topic: str) -> str:
    """A Cloud Pub/Sub sink as a new user writes it: no mode, no host."""
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "CloudPubSubSinkConnector", "batch": {"initial_offsets": "earliest"},
        "continuous": {"commit_interval_ms": 1000},
        "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic, **STRINGS}}]}))
    return str(path)


class _Offsets:
    position_key = "kafka_offsets"

    def __init__(self, name: str, topic: str):
        self.name, self.topic = name, topic


def test_a_hand_materialization_of_an_always_on_bridge_moves_what_is_pending_and_ends(
        stack, spark_remote, tmp_path, unique):
    topic, name = f"hand-{unique}", f"hand_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    subscription = create_pubsub_topic(topic)
    command, env = cli_run(tmp_path, _always_on_bridge(tmp_path, name, topic), name,
                           {"BRIDGE_SPARK_REMOTE": spark_remote})
    produce(topic, [(None, f"a{i}") for i in range(40)])

    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 120, "the materialization did not end after its batch"
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"a{i}" for i in range(40))
    assert recorded_position(env["DAGSTER_HOME"], _Offsets(name, topic)) == 40

    # Dagster's current CLI, from the project folder (dg.toml): the same one batch.
    produce(topic, [(None, f"b{i}") for i in range(5)])
    dg = os.path.join(os.path.dirname(command[0]), "dg")
    launched = subprocess.run([dg, "launch", "--assets", name], env=env, cwd=PROJECT_ROOT, capture_output=True,
                              text=True, timeout=300)
    assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-2000:]
    assert "SupersessionWarning" not in launched.stdout + launched.stderr
    assert sorted(m.data.decode() for m in drain(subscription)) == sorted(f"b{i}" for i in range(5))
    assert recorded_position(env["DAGSTER_HOME"], _Offsets(name, topic)) == 45


def test_a_materialization_of_a_bridge_its_host_keeps_moving_is_refused_in_one_line(
        stack, spark_remote, tmp_path, unique):
    topic, name = f"busy-{unique}", f"busy_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    bridges = _always_on_bridge(tmp_path, name, topic)
    engine = {"BRIDGE_SPARK_REMOTE": spark_remote}
    materialize, env = cli_run(tmp_path, bridges, name, engine)
    host_command, _ = cli_run(tmp_path, bridges, "host_default", engine, always_on=True)  # host_default_job
    host = start(host_command, env, tmp_path / "host.log")
    try:
        produce(topic, [(None, f"a{i}") for i in range(10)])
        arrived: list[str] = []
        wait(lambda: len(arrived.extend(m.data.decode() for m in drain(subscription)) or arrived) >= 10,
             "the host's run moved the first records", 180)

        refused = subprocess.run(materialize, env=env, capture_output=True, text=True, timeout=300)
        assert refused.returncode != 0
        output = refused.stdout + refused.stderr
        line = next(line for line in output.splitlines() if "is always on in host default's run" in line)
        assert f"bridgectl bridges stop {name}" in line
        assert "Traceback" not in output, output[-3000:]
        assert host.poll() is None, "the host's run ended"

        produce(topic, [(None, f"b{i}") for i in range(10)])  # the host's run still moves the bridge, alone
        wait(lambda: len(arrived.extend(m.data.decode() for m in drain(subscription)) or arrived) >= 20,
             "the host's run moved the next records", 120)
        assert sorted(arrived) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    finally:
        interrupt(host)
