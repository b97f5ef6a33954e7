"""KinesisSinkConnector keys: where the stream is, how records are keyed, and the PutRecords limits."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, model_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, ColumnarTransformKeys, ConnectorConfig, ErrorHandlingKeys, KafkaTopicsKeys, TopicNameMappingKeys,
)
from connectors.config.routing import is_routed

# Kinesis Data Streams service limits (PutRecords).
MAX_RECORDS_PER_REQUEST = 500
MAX_BYTES_PER_REQUEST = 5 * 1024 * 1024
MAX_BYTES_PER_RECORD = 1024 * 1024  # data and partition key together


class KinesisSinkConfig(ConnectorConfig, KafkaTopicsKeys, ErrorHandlingKeys, ColumnarTransformKeys,
                        TopicNameMappingKeys):
    target_key: ClassVar[str] = "kinesis.stream.name"
    follows_routers: ClassVar[bool] = True

    stream_name: str = Field(
        alias="kinesis.stream.name", json_schema_extra=HIGH_IMPORTANCE, min_length=1, max_length=128,
        pattern=r"^([a-zA-Z0-9_.-]|\$\{topic\})+$",
        description="the stream written; ${topic} routes each Kafka topic to its own stream (kafka-${topic}), every "
                    "one checked before the run reads; behind a RegexRouter, the topic the router gives the record "
                    "(Transforms)")
    region: str = Field(
        "us-east-1", alias="kinesis.region", json_schema_extra=HIGH_IMPORTANCE,
        description="the stream's region")
    endpoint: str | None = Field(None, alias="kinesis.endpoint",
                                 description="another endpoint; default: AWS_ENDPOINT_URL, else AWS's own")
    partition_key: Literal["key", "partition"] = Field(
        "key", alias="kinesis.partition.key", json_schema_extra=HIGH_IMPORTANCE,
        description="`key`: the Kafka key (UTF-8, at most 256 characters) is the partition key, a null key the Kafka "
                    "partition number, so a key's records share a shard; `partition`: each Kafka partition goes to "
                    "one shard (the explicit hash key of open shard partition % shards)")
    max_request_records: int = Field(MAX_RECORDS_PER_REQUEST, alias="kinesis.max.request.records", ge=1,
                                     le=MAX_RECORDS_PER_REQUEST,
                                     description="records per PutRecords request (Kinesis's limit: 500)")
    max_request_bytes: int = Field(MAX_BYTES_PER_REQUEST, alias="kinesis.max.request.bytes", ge=MAX_BYTES_PER_RECORD,
                                   le=MAX_BYTES_PER_REQUEST,
                                   description="bytes per request, data and partition keys (Kinesis's limit: 5 MiB)")
    retry_timeout_ms: int = Field(
        60_000, alias="kinesis.retry.timeout.ms", ge=1_000,
        description="records Kinesis refuses (throughput exceeded, internal failure) are sent again with exponential "
                    "backoff (0.1 s to 5 s) for this long; then the run fails naming the first record's topic, "
                    "partition and offset, and records nothing")
    aws_access_key_id: str | None = Field(
        None, alias="aws.access.key.id", json_schema_extra=HIGH_IMPORTANCE,
        description="with aws.secret.access.key (both or neither); default: the AWS credential chain (environment, "
                    "profile, instance role)")
    aws_secret_access_key: SecretStr | None = Field(
        None, alias="aws.secret.access.key", json_schema_extra=HIGH_IMPORTANCE,
        description="the secret key (write it as a reference: ${env:...})")

    def stream_for(self, kafka_topic: str) -> str:
        return self.routed(self.stream_name, kafka_topic)

    def routed_target_key(self) -> str | None:
        return "kinesis.stream.name" if is_routed(self.stream_name) else None

    @model_validator(mode="after")
    def _both_keys_or_none(self):
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise ValueError("set both aws.access.key.id and aws.secret.access.key, or neither")
        return self
