"""What the positions end-to-end tests share: `bridgectl bridges offsets` as an operator runs it, a bridge's
materialization from the documented command line, and reading what arrived."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.e2e.helpers import drain, kafka_admin

BRIDGECTL = os.path.join(os.path.dirname(sys.executable), "bridgectl")


def offsets(env: dict[str, str], bridges: str, name: str, *options: str) -> subprocess.CompletedProcess:
    done = subprocess.run([BRIDGECTL, "bridges", "offsets", name, "--file", bridges, *options], env=env,
                          capture_output=True, text=True, timeout=120)
    # Dagster's own note on a DAGSTER_HOME without dagster.yaml (this test's), which a deployment's home has.
    done.stderr = "".join(line for line in done.stderr.splitlines(keepends=True)
                          if not line.startswith("No dagster instance configuration file"))
    return done


def offsets_json(env: dict[str, str], bridges: str, name: str) -> dict:
    done = offsets(env, bridges, name, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def by_partition(document: dict) -> dict[int, dict]:
    return {place["partition"]: place for place in document["places"]}


def kafka_values(topic: str) -> list[str]:
    """Every record of a one-partition topic, sorted."""
    end = kafka_admin().end_offsets({topic: [0]})[topic][0]
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": "offsets-test",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + 60
    while len(values) < end and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    return sorted(values)


def materialize(command: list[str], env: dict[str, str]) -> None:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        # Once (under a loaded machine) a command here did not end, its run finished long before; what it printed
        # says whether it hung in the run or after it.
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"{' '.join(command[2:])} did not end within 300 s; the end of its stderr:\n{said[-3000:]}")
    assert done.returncode == 0, done.stderr[-3000:]


def reset(env: dict[str, str], bridges: str, name: str, *options: str) -> subprocess.CompletedProcess:
    return offsets(env, bridges, name, "--reset", *options)


def reset_moves(env: dict[str, str], bridges: str, name: str, *options: str) -> dict:
    done = reset(env, bridges, name, *options, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def arrived(subscription: str) -> list[str]:
    return sorted(m.data.decode() for m in drain(subscription))
