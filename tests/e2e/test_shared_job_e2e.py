"""A host's shared job runs in launches (stream_jobs.py): streams that open while its first launch runs (bridges
switched on mid-run) share the next launch's task, and so one Python worker, instead of taking a job each; each
stream still ends alone, its slot's end read back from Kafka."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from tests.e2e.helpers import kafka_admin, wait

pytestmark = pytest.mark.e2e


def _slot_work(folder: str, name: str, slot: int) -> None:
    """A stream's slot: says which Python worker runs it, then runs until the test says stop (its own file, or
    everyone's)."""
    Path(folder, name).write_text(str(os.getpid()))
    while not (Path(folder, f"stop-{name}").exists() or Path(folder, "stop").exists()):
        time.sleep(0.05)


def test_streams_opened_while_the_shared_job_runs_share_its_next_launch(stack, spark, tmp_path, unique):
    from connectors.framework.stream_jobs import SharedJob

    topic = f"shared-launch-{unique}"
    kafka_admin().create_topic(topic, partitions=1)  # the slots' ends are committed at its partition 0
    client_config = {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]}
    shared = SharedJob(spark, f"h_{unique}", [], tasks=1, expected={"a"}, gather_s=5.0)

    def join(name: str):
        return shared.join(name, f"stream-{name}-{unique}", functools.partial(_slot_work, str(tmp_path), name), 1,
                           client_config, f"connect-{name}-{unique}", TopicPartition(topic, 0))

    def pid(name: str) -> str | None:
        path = tmp_path / name
        return path.read_text() or None if path.exists() else None

    try:
        a = join("a")
        wait(lambda: pid("a") is not None, "the first launch runs stream a", 120)
        b, c = join("b"), join("c")  # switched on together while a's launch runs
        wait(lambda: pid("b") is not None and pid("c") is not None, "the next launch runs streams b and c", 120)
        assert pid("b") == pid("c") != pid("a"), "b and c should share one task, a's runs apart"
        assert a.alive() and b.alive() and c.alive()

        # b ends alone; c, in the same launch, goes on
        (tmp_path / "stop-b").touch()
        wait(lambda: not b.alive(), "stream b's end is read back", 30)
        assert b.failure() is None
        time.sleep(1.5)  # past a member's look at its slot's end
        assert a.alive() and c.alive()

        (tmp_path / "stop").touch()
        wait(lambda: not a.alive() and not c.alive(), "streams a and c end", 30)
        assert a.failure() is None and c.failure() is None
    finally:
        (tmp_path / "stop").touch()
        shared.close()
