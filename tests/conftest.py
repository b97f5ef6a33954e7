"""Shared fixtures: the local stack and Spark start once per test session."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """Kafka, the Pub/Sub emulator and moto on free loopback ports, for the whole session."""
    from bridgectl.local_stack import LocalStack

    home = Path(os.environ.get("BRIDGE_TEST_STACK_HOME") or tmp_path_factory.mktemp("stack"))
    local_stack = LocalStack(home=home, pick_free_ports=True)
    local_stack.up(log=lambda line: None)
    env = {k: v for k, v in local_stack.env().items() if k != "DAGSTER_HOME"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield local_stack
    local_stack.down(log=lambda line: None)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def spark(stack):
    from resources.spark import SparkResource

    return SparkResource().session()


@pytest.fixture
def unique():
    """A short unique suffix so tests never share topics or subscriptions."""
    return uuid.uuid4().hex[:8]
