"""An always-on bridge through a Kafka broker restart: the run rides it out (its stream restarted from the last
recorded position if it failed), what arrives after it moves, and nothing is lost."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.helpers import cli_run
from tests.e2e.test_continuous_e2e import (
    Archive, CloudSink, CloudSource, KafkaReplica, KinesisSink, LiteSink, LiteSource, PulsarSink, start,
    wait_while_running,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.mark.parametrize("case_type", [CloudSink, LiteSink, KinesisSink, PulsarSink, KafkaReplica, Archive, CloudSource,
                                       LiteSource])
def test_an_always_on_bridge_rides_out_a_kafka_broker_restart(stack, spark_remote, tmp_path, unique, fault_report,
                                                               case_type):
    case = case_type(unique, tmp_path)
    command, env = cli_run(tmp_path, case.bridges_file(), case.name, {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)
    before, after = [f"a{i}" for i in range(300)], [f"b{i}" for i in range(300)]
    run = start(command, env, tmp_path / "run.log")
    try:
        case.send(before[:100])
        home = env["DAGSTER_HOME"]
        wait_while_running(run, home, lambda: set(before[:100]) <= set(case.arrived()), "the first records arrived")
        case.send(before[100:])  # still on their way when the broker stops
        stack.down(only=("kafka",), log=lambda line: None)
        down_at = time.monotonic()
        try:
            time.sleep(2)
        finally:
            stack.up(only=("kafka",), log=lambda line: None)
        case.send(after)
        wait_while_running(run, home, lambda: set(before + after) <= set(case.arrived()),
                           "everything arrived after the restart", timeout_s=120)
        recovered_s = time.monotonic() - down_at
        os.killpg(run.pid, signal.SIGINT)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)

    row = fault_report.count("Kafka broker stopped 2 s under an always-on bridge (warm engine)",
                             f"{case.connector.removesuffix('Connector')} (continuous)", set(before + after),
                             case.arrived(), recovered_s)
    assert row.lost == 0
