"""KinesisSinkConnector keys: where the stream is, how records are keyed, and the PutRecords limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from connectors.config.common import ConnectorConfig, ErrorHandlingKeys, KafkaTopicsKeys
from connectors.config.routing import route

# Kinesis Data Streams service limits (PutRecords).
MAX_RECORDS_PER_REQUEST = 500
MAX_BYTES_PER_REQUEST = 5 * 1024 * 1024
MAX_BYTES_PER_RECORD = 1024 * 1024  # data and partition key together


class KinesisSinkConfig(ConnectorConfig, KafkaTopicsKeys, ErrorHandlingKeys):
    # ${topic} routes each Kafka topic to its own stream (e.g. kafka-${topic}).
    stream_name: str = Field(alias="kinesis.stream.name", min_length=1, max_length=128,
                             pattern=r"^([a-zA-Z0-9_.-]|\$\{topic\})+$")
    region: str = Field("us-east-1", alias="kinesis.region")
    endpoint: str | None = Field(None, alias="kinesis.endpoint")  # default: AWS_ENDPOINT_URL or AWS's own
    # key: the Kafka key is the partition key (a null key: the Kafka partition number), so a key's records
    # share a shard; partition: each Kafka partition goes to one shard (explicit hash key of that shard).
    partition_key: Literal["key", "partition"] = Field("key", alias="kinesis.partition.key")
    max_request_records: int = Field(MAX_RECORDS_PER_REQUEST, alias="kinesis.max.request.records", ge=1,
                                     le=MAX_RECORDS_PER_REQUEST)
    max_request_bytes: int = Field(MAX_BYTES_PER_REQUEST, alias="kinesis.max.request.bytes", ge=MAX_BYTES_PER_RECORD,
                                   le=MAX_BYTES_PER_REQUEST)
    # Records Kinesis refuses for a while (throughput exceeded, internal failure) are tried again with
    # backoff for this long, then the run fails (nothing recorded, the batch is moved again next run).
    retry_timeout_ms: int = Field(60_000, alias="kinesis.retry.timeout.ms", ge=1_000)
    # Default: the AWS credential chain (environment, profile, instance role).
    aws_access_key_id: str | None = Field(None, alias="aws.access.key.id")
    aws_secret_access_key: SecretStr | None = Field(None, alias="aws.secret.access.key")

    def stream_for(self, kafka_topic: str) -> str:
        return route(self.stream_name, kafka_topic)

    @model_validator(mode="after")
    def _both_keys_or_none(self):
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise ValueError("set both aws.access.key.id and aws.secret.access.key, or neither")
        return self
