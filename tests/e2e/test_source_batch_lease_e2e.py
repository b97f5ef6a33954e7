"""The sources' micro-batches watch the bridge's lease as the Kafka-reading ones do (batch_lease.py): with another
run beating it, the Cloud Pub/Sub and Lite sources' tasks stop at their next look and fail the batch naming why,
after what they pulled reached Kafka (Cloud: and was acked; Lite: no cursor is committed), instead of moving the
whole backlog for a run that no longer holds the bridge."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Iterator

import pytest
from confluent_kafka import TopicPartition

from connectors.bridge import BatchSettings
from connectors.kafka.connection import group_committer
from connectors.framework.stream_lease import lease_group
from tests.e2e.helpers import create_pubsub_topic, drain, kafka_admin, publish_pubsub_messages
from tests.e2e.lite_helpers import LOCATION, create_lite_topic, lite_connection, publish_lite

pytestmark = pytest.mark.e2e
MESSAGES = 20_000


@contextlib.contextmanager
def _newer_run_beating(kafka_topic: str, group: str) -> Iterator[None]:
    """Beats the bridge's lease (kafka.topic's partition 0, as its stream's) as a newer run would, every 5 ms, from
    before the block to its end: the batch's own run beats every 0.1 s, and a task's look sees whichever beat landed
    last (a task believes another run only at two looks in a row)."""
    done = threading.Event()

    def beat() -> None:
        taker = group_committer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]}, lease_group(group))
        try:
            beat_number = 0
            while not done.wait(0.005):
                beat_number += 1
                taker.commit(offsets=[TopicPartition(kafka_topic, 0, 10**9 + beat_number, metadata="newer-run")],
                             asynchronous=False)
        finally:
            taker.close()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    time.sleep(0.5)
    try:
        yield
    finally:
        done.set()
        thread.join()


def _kafka_values(topic: str) -> list[bytes]:
    admin = kafka_admin()
    ends = admin.end_offsets(admin.partitions([topic]))[topic]
    from tests.e2e.test_cloud_pubsub_source_e2e import _consume_all

    return [m.value() for m in _consume_all(topic, sum(ends.values()), timeout_s=30)]


def test_a_cloud_source_batch_whose_lease_another_run_holds_stops_and_loses_nothing(stack, spark, unique):
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_source.batch import run_source_batch
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig

    topic, group = f"src-lease-{unique}", f"connect-src_lease_{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    subscription = create_pubsub_topic(topic)
    sent = {f"m{i}".encode() for i in range(MESSAGES)}
    publish_pubsub_messages(topic, [(data, {}) for data in sent])
    # Ten messages a pull: the whole backlog would take thousands of pulls.
    config = CloudPubSubSourceConfig.model_validate({
        "cps.project": subscription.split("/")[1], "cps.subscription": subscription.rsplit("/", 1)[-1],
        "kafka.topic": topic, "cps.maxBatchSize": 10})
    with _newer_run_beating(topic, group), pytest.raises(Exception) as failed:
        run_source_batch(spark, config, PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"]),
                         kafka_admin(), BatchSettings(max_records=MESSAGES), f"src_lease_{unique}", group)
    assert "a newer run took over" in str(failed.value), str(failed.value)[-2000:]

    # The tasks look from their first moment: they may stop before their first pull, or after a few.
    written = _kafka_values(topic)
    assert len(written) < MESSAGES // 2, len(written)
    left = {m.data for m in drain(subscription)}
    assert set(written) | left == sent  # what was pulled reached Kafka and was acked; the rest is still there


def test_a_lite_source_batch_whose_lease_another_run_holds_stops_and_commits_no_cursor(stack, spark, unique):
    from connectors.pubsublite_source.batch import committed_cursors, run_lite_source_batch
    from connectors.pubsublite_source.config import PubSubLiteSourceConfig

    kafka_topic, group = f"lite-src-lease-{unique}", f"connect-lite_src_lease_{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    lite_topic, subscription = create_lite_topic(f"lite-src-lease-{unique}", partitions=2)
    publish_lite(lite_topic, [{"data": f"m{i}".encode()} for i in range(MESSAGES)])
    config = PubSubLiteSourceConfig.model_validate({
        "pubsublite.project": subscription.project, "pubsublite.location": LOCATION,
        "pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic,
        # Ten-message reads: the task reading the backlog takes ~2 s, about twenty looks at its lease. At 100 it took
        # ~0.3 s and now and then ended before its second look (1 run in 10), so nothing stopped it.
        "pubsublite.partition_flow_control.messages": 10})
    with _newer_run_beating(kafka_topic, group), pytest.raises(Exception) as failed:
        run_lite_source_batch(spark, config, lite_connection(), kafka_admin(), {}, BatchSettings(max_records=MESSAGES),
                              f"lite_src_lease_{unique}", group)
    assert "a newer run took over" in str(failed.value), str(failed.value)[-2000:]

    assert len(_kafka_values(kafka_topic)) < MESSAGES
    assert all(cursor <= 0 for cursor in committed_cursors(lite_connection(), config).values())
