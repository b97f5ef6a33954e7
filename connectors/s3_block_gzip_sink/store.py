"""S3 access for the archive: the client, cursors, and ordered uploads (data, then index, then cursor)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.s3_block_gzip_sink.layout import cursor_key


@dataclass(frozen=True)
class Cursor:
    index: str | None  # key of the last index object written for the partition
    next_offset: int


def s3_client(config: S3BlockGzipSinkConfig, outage_timeout_s: float):
    """boto3 client; credentials from the default chain, endpoint from s3.endpoint or AWS_ENDPOINT_URL.
    A silent S3 fails a call after about 3 x `outage_timeout_s` (three attempts), not botocore's 60 s each."""
    import boto3
    from botocore.config import Config

    addressing = {"addressing_style": "path"} if config.s3_path_style else {}
    return boto3.client("s3", endpoint_url=config.s3_endpoint, config=Config(
        s3=addressing, retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=min(outage_timeout_s, 10), read_timeout=outage_timeout_s))


def s3_outages_named(s3, doing: str):
    """S3 down or silent while `doing`, as one line naming its endpoint."""
    from connectors.outage import outages_named, s3_unanswered

    return outages_named("S3", s3.meta.endpoint_url, doing, s3_unanswered())


def read_cursor(s3, config: S3BlockGzipSinkConfig, topic: str, partition: int) -> Cursor | None:
    try:
        body = s3.get_object(Bucket=config.s3_bucket, Key=cursor_key(config.key_prefix(), topic, partition))["Body"]
    except s3.exceptions.NoSuchKey:
        return None
    doc = json.loads(body.read())
    return Cursor(doc["index"], int(doc["next_offset"]))


def write_cursor(s3, config: S3BlockGzipSinkConfig, topic: str, partition: int, cursor: Cursor) -> None:
    s3.put_object(Bucket=config.s3_bucket, Key=cursor_key(config.key_prefix(), topic, partition),
                  Body=json.dumps({"index": cursor.index, "next_offset": cursor.next_offset}).encode(),
                  ContentType="application/json")
