"""Outages of the other side: Pub/Sub, Pub/Sub Lite or S3 is stopped. The run fails within the bridge's
outage timeout, in one line naming the system, its address and what was being done, records nothing,
and the run after the restart moves everything once.

pstest and moto keep their data in memory, so a restart empties them: the Pub/Sub topic and the S3
bucket are made again after it (what a real service would still have). Our Lite server keeps its data.
"""

from __future__ import annotations

import os
import time

import boto3
import pytest
import yaml
from dagster import AssetKey, DagsterInstance, materialize

from asset_metadata import recorded_position
from bridge_assets.definitions import build_definitions
from connectors.framework.plugin_parts import KAFKA_OFFSETS
from connectors.s3_block_gzip_sink.reader import read_from_offset
from resources import default_resources
from tests.e2e.helpers import PROJECT, create_pubsub_topic, drain, kafka_admin, produce, sink_bridges_file
from tests.e2e.lite_helpers import create_lite_topic, lite_bridges_file, publish_lite, read_whole_lite_topic
from tests.e2e.test_pubsublite_source_e2e import read_kafka

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
OUTAGE_TIMEOUT_S = 10
BATCH = {"outage_timeout_seconds": OUTAGE_TIMEOUT_S}


def _run(defs, name: str, instance: DagsterInstance):
    return materialize([defs.get_assets_def(name)], resources=default_resources(), instance=instance,
                       raise_on_error=False)


def _fails_in_one_line_while_down(stack, service: str, defs, name: str, instance, expected: str) -> float:
    """Run `name` with `service` stopped: it fails with one line starting with `expected`, in time.
    Returns the moment the outage began."""
    stack.down(only=(service,), log=lambda line: None)
    down_at = time.monotonic()
    try:
        result = _run(defs, name, instance)
        failed_after_s = time.monotonic() - down_at
    finally:
        stack.up(only=(service,), log=lambda line: None)
    assert not result.success
    error = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
    assert expected in error.message, error.message[:2000]
    assert error.message.count("\n") == 1 and error.cause is None, error.message[:2000]
    assert "the run recorded nothing" in error.message
    assert failed_after_s < 3 * OUTAGE_TIMEOUT_S + 15
    assert not result.asset_materializations_for_node(name)
    return down_at


def test_pubsub_down_fails_the_sink_run_in_one_line(stack, spark, tmp_path, unique, fault_report):
    topic, name = f"ps-down-{unique}", f"ps_down_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    produced = {f"p{i}" for i in range(2_000)}
    produce(topic, [(None, v) for v in sorted(produced)])
    defs = build_definitions(sink_bridges_file(tmp_path, name, topic, batch=BATCH))
    instance = DagsterInstance.ephemeral()
    down_at = _fails_in_one_line_while_down(
        stack, "pubsub", defs, name, instance,
        f"Pub/Sub at {os.environ['PUBSUB_EMULATOR_HOST']} did not answer for {OUTAGE_TIMEOUT_S} s while publishing "
        f"topic {topic} partition")
    assert recorded_position(instance, AssetKey(name), KAFKA_OFFSETS) == {}
    subscription = create_pubsub_topic(topic)
    assert _run(defs, name, instance).success
    row = fault_report.count("Pub/Sub emulator stopped, then restarted", "CloudPubSubSink", produced,
                             [m.data.decode() for m in drain(subscription)], time.monotonic() - down_at)
    assert row.lost == 0 and row.duplicated == 0


def test_pubsub_down_fails_the_source_run_in_one_line(stack, spark, tmp_path, unique):
    name, kafka_topic = f"ps_src_down_{unique}", f"ps-src-down-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=1)
    subscription = create_pubsub_topic(kafka_topic)
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "CloudPubSubSourceConnector", "mode": "batch", "batch": {**BATCH, "parallelism": 1},
        "config": {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
                   "kafka.topic": kafka_topic}}]}))
    _fails_in_one_line_while_down(stack, "pubsub", build_definitions(str(path)), name, DagsterInstance.ephemeral(),
                                  f"Pub/Sub at {os.environ['PUBSUB_EMULATOR_HOST']} did not answer while pulling "
                                  f"from {subscription}")
    assert read_kafka(kafka_topic) == []


def test_lite_down_fails_the_sink_run_in_one_line(stack, spark, tmp_path, unique, fault_report):
    topic, name = f"lite-down-{unique}", f"lite_down_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    lite_topic, subscription = create_lite_topic(topic, partitions=2)
    produced = {f"l{i}" for i in range(2_000)}
    produce(topic, [(None, v) for v in sorted(produced)])
    defs = build_definitions(lite_bridges_file(tmp_path, name, "PubSubLiteSinkConnector",
                                               {"topics": topic, "pubsublite.topic": topic}, batch=BATCH))
    instance = DagsterInstance.ephemeral()
    down_at = _fails_in_one_line_while_down(
        stack, "pubsublite", defs, name, instance,
        f"Pub/Sub Lite at {os.environ['PUBSUBLITE_API_ENDPOINT']} did not answer while reading the partition count")
    assert _run(defs, name, instance).success
    delivered = [m.message.data.decode() for m in read_whole_lite_topic(lite_topic, subscription, 2)]
    row = fault_report.count("Lite server stopped, then restarted", "PubSubLiteSink", produced, delivered,
                             time.monotonic() - down_at)
    assert row.lost == 0 and row.duplicated == 0


def test_lite_down_fails_the_source_run_in_one_line(stack, spark, tmp_path, unique, fault_report):
    name, kafka_topic = f"lite_src_down_{unique}", f"lite-src-down-{unique}"
    kafka_admin().create_topic(kafka_topic, partitions=2)
    topic, subscription = create_lite_topic(f"lite-src-down-{unique}", partitions=2)
    produced = {f"s{i}" for i in range(500)}
    publish_lite(topic, [{"data": v.encode()} for v in sorted(produced)])
    defs = build_definitions(lite_bridges_file(tmp_path, name, "PubSubLiteSourceConnector", {
        "pubsublite.subscription": subscription.name, "kafka.topic": kafka_topic}, batch=BATCH))
    instance = DagsterInstance.ephemeral()
    down_at = _fails_in_one_line_while_down(
        stack, "pubsublite", defs, name, instance,
        f"Pub/Sub Lite at {os.environ['PUBSUBLITE_API_ENDPOINT']} did not answer while reading the cursors of "
        f"{subscription}")
    assert _run(defs, name, instance).success
    row = fault_report.count("Lite server stopped, then restarted", "PubSubLiteSource", produced,
                             [r.value().decode() for r in read_kafka(kafka_topic)], time.monotonic() - down_at)
    assert row.lost == 0 and row.duplicated == 0


def test_s3_down_fails_the_archive_run_in_one_line(stack, spark, tmp_path, unique, fault_report):
    topic, name, bucket = f"s3-down-{unique}", f"s3_down_{unique}", f"s3-down-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket=bucket)
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "S3BlockGzipSinkConnector", "mode": "batch",
                                                 "batch": BATCH, "config": {
        "topics": topic, "s3.bucket": bucket, "s3.prefix": "w", "s3.path_style": True,
        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}]}))
    produced = {f"line-{i}" for i in range(1_000)}
    produce(topic, [(None, v) for v in sorted(produced)])
    defs = build_definitions(str(path))
    instance = DagsterInstance.ephemeral()
    down_at = _fails_in_one_line_while_down(
        stack, "s3", defs, name, instance,
        f"S3 at {os.environ['AWS_ENDPOINT_URL']} did not answer while reading the archive's cursors in s3://{bucket}/w")
    s3.create_bucket(Bucket=bucket)
    assert _run(defs, name, instance).success
    row = fault_report.count("S3 (moto) stopped, then restarted", "S3BlockGzipSink", produced,
                             [line.decode() for _, line in read_from_offset(s3, bucket, "w", topic, 0, 0)],
                             time.monotonic() - down_at)
    assert row.lost == 0 and row.duplicated == 0


def test_lite_server_restarted_mid_batch_loses_nothing(stack, spark_remote, tmp_path, unique, fault_report):
    """The Lite server stops part-way through a sink batch and comes back: the publish streams reconnect
    and resend what was not acknowledged with the same client id and sequence numbers, which the server
    remembers across its restart, so nothing is stored twice; if the run fails instead, the next run
    moves the rest. Nothing is lost either way."""
    import subprocess

    from tests.e2e.helpers import cli_run
    from tests.e2e.lite_helpers import lite_connection

    topic, name = f"lite-restart-{unique}", f"lite_restart_{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    lite_topic, subscription = create_lite_topic(topic, partitions=2)
    produced = {f"m{i:06d}" for i in range(150_000)}
    produce(topic, [(None, v) for v in sorted(produced)])
    bridges = lite_bridges_file(tmp_path, name, "PubSubLiteSinkConnector", {"topics": topic, "pubsublite.topic": topic},
                                batch={"max_records": len(produced)})
    command, env = cli_run(tmp_path, bridges, name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    stats = lite_connection().topic_stats_service(lite_topic.location.region)

    def stored() -> int:
        return sum(stats.compute_head_cursor(request={"topic": str(lite_topic), "partition": p}).head_cursor.offset
                   for p in range(2))

    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while stored() == 0:
        assert time.monotonic() < deadline and run.poll() is None, "the batch did not start"
        time.sleep(0.05)
    stored_before_stop = stored()
    stack.down(only=("pubsublite",), log=lambda line: None)
    stopped_at = time.monotonic()
    stack.up(only=("pubsublite",), log=lambda line: None)
    _, stderr = run.communicate(timeout=600)
    assert stored_before_stop < len(produced), "the batch ended before the server could be stopped"
    if run.returncode != 0:
        again = subprocess.run(command, env=env, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr[-3000:]
    recovered_s = time.monotonic() - stopped_at
    delivered = [m.message.data.decode() for m in read_whole_lite_topic(lite_topic, subscription, 2)]
    row = fault_report.count("Lite server restarted mid-batch (warm engine)", "PubSubLiteSink", produced, delivered,
                             recovered_s)
    assert row.lost == 0
