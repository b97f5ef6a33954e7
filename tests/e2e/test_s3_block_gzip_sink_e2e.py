"""Kafka -> S3 Block-GZIP archive against the real local Kafka and the moto S3 server."""

from __future__ import annotations

import datetime
import gzip
import json
import os
import subprocess
import sys
import time
import zlib

import boto3
import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from bridge_assets.definitions import build_definitions
from connectors.s3_block_gzip_sink.reader import read_from_offset
from tests.e2e.helpers import cli_run, kafka_admin, kill_run_midway, materialize_bridge

pytestmark = pytest.mark.e2e
# Record timestamps: recent, or the broker's 7-day retention deletes them mid-test.
DAY_MS = int(time.time() * 1000) - 3_600_000
DAY = datetime.datetime.fromtimestamp(DAY_MS / 1000, tz=datetime.timezone.utc).strftime("%Y-%m-%d")


def _s3():
    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])


def _bridges(tmp_path, name: str, topic: str, bucket: str, keys: dict | None = None) -> str:
    config = {"topics": topic, "s3.bucket": bucket, "s3.prefix": "arch", "s3.path_style": True,
              "value.converter": "org.apache.kafka.connect.storage.StringConverter", **(keys or {})}
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{"name": name, "connector": "S3BlockGzipSinkConnector", "mode": "batch",
                                                 "config": config}]}))
    return str(path)


def _produce(topic: str, partition: int, values: list[str], timestamp_ms: int = DAY_MS) -> None:
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for value in values:
        producer.produce(topic, value=value, partition=partition, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def _keys(bucket: str) -> list[str]:
    return sorted(o["Key"] for o in _s3().list_objects_v2(Bucket=bucket).get("Contents", []))


def test_files_indexes_members_and_cursor(stack, spark, tmp_path, unique):
    topic, name, bucket = f"arch-{unique}", f"arch_{unique}", f"arch-{unique}"
    kafka_admin().create_topic(topic, partitions=2)
    _s3().create_bucket(Bucket=bucket)
    _produce(topic, 0, [f"p0-{i}" for i in range(25)])
    _produce(topic, 1, ["p1-0", "p1-1", "p1-2"])
    defs = build_definitions(_bridges(tmp_path, name, topic, bucket,
                                      {"compressed_block_size": 30, "flush.size": 10}))

    metadata = materialize_bridge(defs, name)
    assert metadata["records_archived"].value == 28 and metadata["files_written"].value == 4
    stem = f"arch/{DAY}/{topic}"
    assert _keys(bucket) == sorted([
        f"{stem}-00000-000000000000.gz", f"{stem}-00000-000000000000.index.json",
        f"{stem}-00000-000000000010.gz", f"{stem}-00000-000000000010.index.json",
        f"{stem}-00000-000000000020.gz", f"{stem}-00000-000000000020.index.json",
        f"{stem}-00001-000000000000.gz", f"{stem}-00001-000000000000.index.json",
        f"arch/cursors/{topic}-00000.json", f"arch/cursors/{topic}-00001.json",
    ])
    s3 = _s3()
    data = s3.get_object(Bucket=bucket, Key=f"{stem}-00000-000000000010.gz")["Body"].read()
    index = json.loads(s3.get_object(Bucket=bucket, Key=f"{stem}-00000-000000000010.index.json")["Body"].read())
    assert gzip.decompress(data) == "".join(f"p0-{i}\n" for i in range(10, 20)).encode()
    offset = 10
    for chunk in index["chunks"]:  # 6-byte lines, 30-byte blocks: 5 records a member
        member = data[chunk["byte_offset"]:chunk["byte_offset"] + chunk["byte_length"]]
        expected = "".join(f"p0-{i}\n" for i in range(offset, offset + chunk["num_records"])).encode()
        assert chunk["first_record_offset"] == offset and zlib.decompress(member, 31) == expected
        assert chunk["byte_length_uncompressed"] == len(expected)
        offset += chunk["num_records"]
    assert [c["num_records"] for c in index["chunks"]] == [5, 5]
    cursor = json.loads(s3.get_object(Bucket=bucket, Key=f"arch/cursors/{topic}-00000.json")["Body"].read())
    assert cursor == {"index": f"{stem}-00000-000000000020.index.json", "next_offset": 25}

    # Resume from S3: only the new records, in a new file named by its first offset.
    _produce(topic, 0, ["p0-25", "p0-26"])
    assert materialize_bridge(defs, name)["records_archived"].value == 2
    assert f"{stem}-00000-000000000025.gz" in _keys(bucket)
    assert [line for _, line in read_from_offset(s3, bucket, "arch", topic, 0, 23)] == \
        [b"p0-23", b"p0-24", b"p0-25", b"p0-26"]
    printed = subprocess.run(
        [sys.executable, "-m", "bridgectl.cli", "s3", "read", "--bucket", bucket, "--prefix", "arch",
         "--topic", topic, "--partition", "0", "--offset", "12", "--limit", "3"],
        capture_output=True, check=True).stdout
    assert printed == b"12\tp0-12\n13\tp0-13\n14\tp0-14\n"


def test_a_topic_that_gains_partitions(stack, spark, tmp_path, unique):
    topic, name, bucket = f"grow-{unique}", f"grow_{unique}", f"grow-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    _s3().create_bucket(Bucket=bucket)
    defs = build_definitions(_bridges(tmp_path, name, topic, bucket))
    _produce(topic, 0, ["a", "b"])
    materialize_bridge(defs, name)
    admin = AdminClient({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
    # The broker's metadata shows the new partition a moment after the call returns; a run planned
    # before that archives it in the next run (correct, but not what this test looks at).
    deadline = time.monotonic() + 30
    while kafka_admin().partitions([topic]).get(topic) != [0, 1]:
        assert time.monotonic() < deadline, "the new partition never showed in the metadata"
        time.sleep(0.2)
    _produce(topic, 1, ["c"])
    _produce(topic, 0, ["d"])
    assert materialize_bridge(defs, name)["records_archived"].value == 2
    s3 = _s3()
    assert [line for _, line in read_from_offset(s3, bucket, "arch", topic, 0, 0)] == [b"a", b"b", b"d"]
    assert [line for _, line in read_from_offset(s3, bucket, "arch", topic, 1, 0)] == [b"c"]


def test_a_killed_run_leaves_no_gap_and_no_second_copy(stack, tmp_path, unique):
    topic, name, bucket = f"akill-{unique}", f"akill_{unique}", f"akill-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    s3 = _s3()
    s3.create_bucket(Bucket=bucket)
    count = 60_000
    _produce(topic, 0, [f"r{i:06d}-" + "x" * 200 for i in range(count)])
    command, env = cli_run(tmp_path, _bridges(tmp_path, name, topic, bucket, {"flush.size": 2000}), name)
    kill_run_midway(command, env, lambda: any(k.endswith(".gz") for k in _keys(bucket)))
    assert 0 < sum(k.endswith(".gz") for k in _keys(bucket)) < count // 2000

    second = subprocess.run(command, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-3000:]
    offsets = [offset for offset, _ in read_from_offset(s3, bucket, "arch", topic, 0, 0)]
    assert offsets == list(range(count))  # every offset once: no gap, no duplicate
    data_files = [k for k in _keys(bucket) if k.endswith(".gz")]
    assert data_files == [f"arch/{DAY}/{topic}-00000-{o:012d}.gz" for o in range(0, count, 2000)]


def test_latest_starts_at_the_end_once_then_goes_on_from_the_recorded_offsets(stack, spark, tmp_path, unique):
    """A bridge on initial_offsets=latest: the first run starts at the end (archives none of what was
    there), the next run archives what came after it, although no cursor object existed yet."""
    from dagster import DagsterInstance

    topic, name, bucket = f"arch-latest-{unique}", f"arch_latest_{unique}", f"arch-latest-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    _s3().create_bucket(Bucket=bucket)
    _produce(topic, 0, ["before-0", "before-1"])
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "S3BlockGzipSinkConnector", "mode": "batch", "batch": {"initial_offsets": "latest"},
        "config": {"topics": topic, "s3.bucket": bucket, "s3.prefix": "arch", "s3.path_style": True,
                   "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}]}))
    defs = build_definitions(str(path))
    with DagsterInstance.ephemeral() as instance:
        first = materialize_bridge(defs, name, instance)
        assert first["records_archived"].value == 0 and first["kafka_offsets"].value == {topic: {"0": 2}}
        _produce(topic, 0, ["after-0", "after-1", "after-2"])
        assert materialize_bridge(defs, name, instance)["records_archived"].value == 3
    assert [line.decode() for _, line in read_from_offset(_s3(), bucket, "arch", topic, 0, 0)] == \
        ["after-0", "after-1", "after-2"]


def test_a_filter_keeps_records_out_of_the_archive_and_the_cursor_passes_them(stack, spark, tmp_path, unique):
    topic, name, bucket = f"filt-{unique}", f"filt_{unique}", f"filt-{unique}"
    kafka_admin().create_topic(topic, partitions=1)
    _s3().create_bucket(Bucket=bucket)
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "log_level": 3})
    for i in range(6):  # offsets 1 and 4 carry the header the Filter drops on; offset 3 is a tombstone
        producer.produce(topic, value=None if i == 3 else f"v{i}", partition=0, timestamp=DAY_MS,
                         headers=[("internal", b"1")] if i in (1, 4) else None)
    assert producer.flush(30) == 0
    defs = build_definitions(_bridges(tmp_path, name, topic, bucket, {
        "transforms": "dropInternal,mark", "transforms.dropInternal.type": "Filter",
        "transforms.dropInternal.predicate": "isInternal",
        "transforms.mark.type": "InsertHeader", "transforms.mark.header": "via", "transforms.mark.value.literal": "x",
        "predicates": "isInternal", "predicates.isInternal.type": "HasHeaderKey", "predicates.isInternal.name": "internal"}))

    metadata = materialize_bridge(defs, name)
    assert (metadata["records_read"].value, metadata["records_archived"].value, metadata["records_filtered"].value) \
        == (6, 4, 2)
    s3 = _s3()
    assert list(read_from_offset(s3, bucket, "arch", topic, 0, 0)) == [(0, b"v0"), (2, b"v2"), (3, b""), (5, b"v5")]
    cursor = json.loads(s3.get_object(Bucket=bucket, Key=f"arch/cursors/{topic}-00000.json")["Body"].read())
    assert cursor["next_offset"] == 6
    assert materialize_bridge(defs, name)["records_read"].value == 0  # nothing read again
