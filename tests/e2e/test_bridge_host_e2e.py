"""Bridges sharing a host (`continuous.host`) under `dagster dev`, as a user runs them: one run moves all three
Kafka -> Pub/Sub bridges; one switched off (`bridgectl bridges stop`) ends in that run after recording its commit
while the others go on moving; switched on again, it joins the same run and moves what waited. Each bridge keeps
its own position: nothing lost, nothing copied. A poison record fails its bridge alone; the run's process killed -9
is fenced by the host's keeper and the next run moves what came meanwhile."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from resources.lease import _heartbeat_key
from tests.e2e.helpers import PROJECT, DagsterDev, create_pubsub_topic, drain, kafka_admin, produce, wait

pytestmark = pytest.mark.e2e
STRINGS = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
STALE_AFTER_S = 15
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
    # A lease stale after 15 s (three 5 s heartbeats missed), not 30: the wait past it below is shorter.
    dev = DagsterDev(tmp_path, bridges, spark_remote, {"BRIDGE_LEASE_STALE_AFTER_SECONDS": str(STALE_AFTER_S)})
    home, bridgectl = dev.home, dev.bridgectl
    received: dict[str, list[str]] = {name: [] for name in names}

    def arrived(i: int) -> list[str]:
        received[names[i]] += [m.data.decode() for m in drain(subscriptions[i])]
        return received[names[i]]

    with dev:
        first = {i: [f"first-{i}-{n}" for n in range(50)] for i in range(3)}
        for i in range(3):
            produce(topics[i], [(None, _value(i, v)) for v in first[i]])
        for i in range(3):
            wait(lambda: sorted(arrived(i)) == sorted(first[i]), f"bridge {i}'s first records arrived", 180)
        [run] = _runs(home, [DagsterRunStatus.STARTED])  # one run moves all three
        assert run.tags.get("bridge-host") == host

        # Switched off: bridge 1 ends in that run, its position recorded; the others go on.
        assert "stopped" in bridgectl("stop", names[1])
        wait(lambda: "hosted_1" in dev.log.read_text() and _recorded_offsets(home, names[1]) == 50,
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

        # A record bridge 2 cannot convert (errors.tolerance none) fails bridge 2 alone at once: the run says so and
        # holds it stopped (started again, it would fail on the same record), and bridge 0 goes on moving in the same
        # run (in the same shared Spark job).
        produce(topics[2], [(None, "{malformed")])
        wait(lambda: any(names[2] in line and "stays stopped" in line and "JsonConverter" in line
                         for line in _run_lines(home, run.run_id)), "the run reported bridge 2's failure")
        third = [f"third-0-{n}" for n in range(20)]
        produce(topics[0], [(None, v) for v in third])
        wait(lambda: sorted(arrived(0)) == sorted(first[0] + second[0] + third), "bridge 0 kept moving")
        assert [r.run_id for r in _runs(home, [DagsterRunStatus.STARTED])] == [run.run_id]
        assert sorted(arrived(2)) == sorted(first[2] + second[2])  # nothing past the poison record
        # Not started again inside the run's stream first: it would fail on the same record (and send again).
        assert not [line for line in _run_lines(home, run.run_id)
                    if line.startswith(names[2]) and "started again from its last commit" in line]
        [status] = json.loads(bridgectl("status", names[2], "--json", stdout_only=True))
        assert status["sensor"] == "RUNNING" and status["last_run"]["run_id"] == run.run_id
        assert names[2] in status["last_error"]["message"]
        # Held stopped past the lease's staleness (STALE_AFTER_S without its heartbeat): the keeper does not take the
        # host's run for dead (bridge 2 gave up its claim when it ended), and bridge 0 goes on in it.
        time.sleep(STALE_AFTER_S + 5)
        assert [r.run_id for r in _runs(home, [DagsterRunStatus.STARTED])] == [run.run_id]
        more = [f"more-0-{n}" for n in range(10)]
        produce(topics[0], [(None, v) for v in more])
        wait(lambda: set(more) <= set(arrived(0)), "bridge 0 kept moving in the same run")
        third += more

        # The run's process killed -9: the keeper fences it and starts the next run, which moves what came meanwhile.
        with DagsterInstance.from_config(str(home)) as instance:
            key = _heartbeat_key(names[0])
            beat = json.loads(instance.run_storage.get_cursor_values({key})[key])
        assert beat["run_id"] == run.run_id
        os.kill(beat["pid"], signal.SIGKILL)
        fourth = [f"fourth-0-{n}" for n in range(40)]
        produce(topics[0], [(None, v) for v in fourth])  # in the lease's lapse or after it
        wait(lambda: [r.run_id for r in _runs(home, [DagsterRunStatus.STARTED])] not in ([], [run.run_id]),
             "the keeper started the next run", 180)
        fifth = [f"fifth-0-{n}" for n in range(40)]
        produce(topics[0], [(None, v) for v in fifth])
        everything = first[0] + second[0] + third + fourth + fifth
        wait(lambda: set(arrived(0)) == set(everything), "bridge 0's records after the kill arrived", 180)
        assert len(arrived(0)) - len(everything) <= len(third) + len(fourth), "more copies than moved since a commit"

        # Bridge 2 stays stopped in the next run too, its check failed, until it is switched off and on again; then
        # it is tried afresh (and, the record still there, held stopped again).
        [next_run] = _runs(home, [DagsterRunStatus.STARTED])
        held = lambda: [line for line in _run_lines(home, next_run.run_id)  # noqa: E731
                        if names[2] in line and "stays stopped" in line]
        wait(lambda: held(), "the next run held bridge 2 stopped")
        assert sorted(arrived(2)) == sorted(first[2] + second[2])
        assert "stopped" in bridgectl("stop", names[2])
        wait(lambda: any("starts afresh" in line for line in _run_lines(home, next_run.run_id)),
             "switching bridge 2 off released it")
        assert "running" in bridgectl("start", names[2])
        wait(lambda: len(held()) >= 2, "bridge 2 was tried again and held stopped again")
