"""S3BlockGzipSinkConnector keys: the seed connector's, plus a bound on records per file."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, ColumnarTransformKeys, ConnectorConfig, ConverterKeys, ErrorHandlingKeys, KafkaTopicsKeys,
)


class S3BlockGzipSinkConfig(ConnectorConfig, KafkaTopicsKeys, ConverterKeys, ErrorHandlingKeys, ColumnarTransformKeys):
    columnar_transforms_named: ClassVar[str] = "Filter, InsertHeader and DropHeaders"
    routers_refused: ClassVar[str | None] = (
        "which the archive does not support: its files, indexes and cursors are those of each Kafka topic partition "
        "(name the folder with s3.prefix)")

    s3_bucket: str = Field(
        alias="s3.bucket", json_schema_extra=HIGH_IMPORTANCE, min_length=3,
        description="the bucket the archive is written to")
    s3_prefix: str = Field(
        "", alias="s3.prefix", json_schema_extra=HIGH_IMPORTANCE,
        description="the key prefix of every object it writes")
    s3_endpoint: str | None = Field(None, alias="s3.endpoint",
                                    description="another S3 endpoint; default: AWS_ENDPOINT_URL, else AWS's own")
    s3_path_style: bool = Field(False, alias="s3.path_style", description="path-style addressing (bucket in the path)")
    compressed_block_size: int = Field(
        64 * 1024 * 1024, alias="compressed_block_size", ge=1,
        description="uncompressed bytes per gzip member: a block that decompresses alone from one range GET")
    local_buffer_dir: str | None = Field(None, alias="local.buffer.dir",
                                         description="where a file is assembled before upload; default: the system's "
                                                     "temp folder")
    # The seed's files followed Kafka Connect's flush interval instead; the name is Confluent's S3 sink's key.
    flush_size: int = Field(100_000, alias="flush.size", json_schema_extra=HIGH_IMPORTANCE, ge=1,
                            description="records per file; a re-run from the same offset writes the same object names")

    # Confluent's S3 sink's key for closing files on the wall clock.
    rotate_schedule_interval_ms: int = Field(
        -1, alias="rotate.schedule.interval.ms", json_schema_extra=HIGH_IMPORTANCE,
        description="continuous mode: a file is uploaded at most this long after its first record was read, or "
                    "sooner at flush.size records (at most 10,000 a file: a file is gathered in memory); -1: the "
                    "bridge's continuous.commit_interval_ms. A batch uploads its files at its end")

    @field_validator("rotate_schedule_interval_ms")
    @classmethod
    def _rotation_set_or_not(cls, value: int) -> int:
        if value != -1 and value < 100:
            raise ValueError("must be -1 (the bridge's commit interval) or at least 100 ms")
        return value

    def key_prefix(self) -> str:
        return self.s3_prefix.strip("/")

    @property
    def reads_kafka_headers(self) -> bool:
        # The archive keeps values and timestamps; only a dead letter (the whole record) and the transforms' predicates
        # need the headers.
        return bool(self.errors_deadletterqueue_topic_name) or bool(self.transforms)
