"""A failing bridge in a host looks failing, steadily, while the host's other bridges keep moving: three Cloud Pub/Sub
sinks in one host run (`dagster job execute -j host_<host>_job`, as from a shell), one of them writing to a Pub/Sub
topic that does not exist for a minute. At every look its batch_succeeded check is failed, it records no
materialization (nothing moved), each failure is reported with its cause and a growing count in a row; the other two
deliver throughout. Once the topic exists it delivers what waited and its check passes again."""

from __future__ import annotations

import re
import time

import pytest
import yaml
from dagster import AssetCheckKey, AssetKey, DagsterInstance

from tests.e2e.helpers import PROJECT, cli_run, create_pubsub_topic, drain, interrupt, kafka_admin, produce, wait
from tests.e2e.test_continuous_e2e import run_story, start

pytestmark = pytest.mark.e2e

STRINGS = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
           "value.converter": "org.apache.kafka.connect.storage.StringConverter"}


def _latest_check(instance: DagsterInstance, name: str):
    key = AssetCheckKey(AssetKey(name), "batch_succeeded")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
    return record.event.asset_check_evaluation if record is not None and record.event is not None else None


def test_a_failing_hosted_bridge_stays_failed_until_it_delivers_and_the_others_move_on(
        stack, spark_remote, tmp_path, unique):
    host = f"hf_{unique}"
    names = [f"ok_a_{unique}", f"ok_b_{unique}", f"failing_{unique}"]
    topics = [f"hf-{i}-{unique}" for i in range(3)]
    for topic in topics:
        kafka_admin().create_topic(topic, partitions=1)
    subscriptions = [create_pubsub_topic(topic) for topic in topics[:2]]  # the third's topic comes later
    bridges = tmp_path / "bridges.yaml"
    bridges.write_text(yaml.safe_dump({"bridges": [
        {"name": name, "connector": "CloudPubSubSinkConnector",
         "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic, **STRINGS},
         "batch": {"initial_offsets": "earliest", "outage_timeout_seconds": 5},
         "sensor": {"interval_seconds": 2}, "continuous": {"host": host, "commit_interval_ms": 1000}}
        for name, topic in zip(names, topics)]}))
    command, env = cli_run(tmp_path, str(bridges), f"host_{host}", {"BRIDGE_SPARK_REMOTE": spark_remote},
                           always_on=True)  # the host's job, host_<host>_job
    home = env["DAGSTER_HOME"]
    run = start(command, env, tmp_path / "host.log")
    arrived: list[list[str]] = [[], []]

    def moved(i: int, values: list[str]) -> bool:
        arrived[i] += [m.data.decode() for m in drain(subscriptions[i])]
        return set(values) <= set(arrived[i])

    try:
        sent = [[], [], []]
        for i in range(3):
            sent[i] += [f"first-{i}-{n}" for n in range(20)]
            produce(topics[i], [(None, v) for v in sent[i]])
        with DagsterInstance.from_config(home) as instance:
            wait(lambda: (e := _latest_check(instance, names[2])) is not None and not e.passed,
                 "the failing bridge's check failed", 180)
            # A minute of failing: its check failed at every look, the others delivering throughout.
            looks, until = 0, time.monotonic() + 60
            while time.monotonic() < until:
                assert run.poll() is None, f"the host's run ended\n{run_story(home)}"
                evaluation = _latest_check(instance, names[2])
                assert not evaluation.passed, f"the failing bridge's check passed at look {looks}"
                for i in range(2):
                    sent[i].append(f"during-{i}-{looks}")
                    produce(topics[i], [(None, sent[i][-1])])
                looks += 1
                time.sleep(2)
            for i in range(2):
                wait(lambda: moved(i, sent[i]), f"healthy bridge {i} delivered throughout", 60)
            assert instance.get_latest_materialization_event(AssetKey(names[2])) is None, \
                "a commit that moved nothing was recorded as a materialization"
            lines = [e.user_message for e in instance.all_logs(instance.get_runs(limit=1)[0].run_id)
                     if not e.is_dagster_event and e.user_message.startswith(f"bridge {names[2]}")]
        counts = [int(m.group(1)) for line in lines if (m := re.search(r"\((\d+) failed in a row", line))]
        assert len(counts) >= 2 and counts == list(range(1, len(counts) + 1)), lines  # backs off, counting on
        assert all(topics[2] in line for line in lines), lines  # every report names the cause

        # The topic comes: the bridge delivers what waited, and its check passes again.
        subscription = create_pubsub_topic(topics[2])
        got: list[str] = []
        wait(lambda: got.extend(m.data.decode() for m in drain(subscription)) or set(sent[2]) <= set(got),
             "the failing bridge delivered once its topic existed", 120)
        with DagsterInstance.from_config(home) as instance:
            wait(lambda: _latest_check(instance, names[2]).passed, "its check passed again", 30)
        assert run.poll() is None
    finally:
        interrupt(run)
