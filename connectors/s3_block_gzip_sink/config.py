"""S3BlockGzipSinkConnector keys: the seed connector's, plus a bound on records per file."""

from __future__ import annotations

from pydantic import Field

from connectors.config.common import ConnectorConfig, ConverterKeys, ErrorHandlingKeys, KafkaTopicsKeys


class S3BlockGzipSinkConfig(ConnectorConfig, KafkaTopicsKeys, ConverterKeys, ErrorHandlingKeys):
    s3_bucket: str = Field(alias="s3.bucket", min_length=3)
    s3_prefix: str = Field("", alias="s3.prefix")
    s3_endpoint: str | None = Field(None, alias="s3.endpoint")  # default: AWS_ENDPOINT_URL or AWS's own
    s3_path_style: bool = Field(False, alias="s3.path_style")
    # Uncompressed bytes per gzip member (a block readable alone with one range GET).
    compressed_block_size: int = Field(64 * 1024 * 1024, alias="compressed_block_size", ge=1)
    # Where a file is assembled before upload; default: the system's temp folder.
    local_buffer_dir: str | None = Field(None, alias="local.buffer.dir")
    # Records per chunk file (the seed's files followed Kafka Connect's flush interval instead);
    # the name is Confluent's S3 sink's key for the same bound.
    flush_size: int = Field(100_000, alias="flush.size", ge=1)

    def key_prefix(self) -> str:
        return self.s3_prefix.strip("/")

    @property
    def reads_kafka_headers(self) -> bool:
        # The archive keeps values and timestamps; only a dead letter (the whole record) needs the headers.
        return bool(self.errors_deadletterqueue_topic_name)
