"""PulsarSinkConnector keys: the Pulsar service, the target topic (routed by ${topic}) and how to send."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from connectors.config.common import (
    HIGH_IMPORTANCE, ColumnarTransformKeys, ConnectorConfig, ErrorHandlingKeys, KafkaTopicsKeys, TopicNameMappingKeys,
)
from connectors.config.routing import TargetTemplate, is_routed


class PulsarSinkConfig(ConnectorConfig, KafkaTopicsKeys, ErrorHandlingKeys, ColumnarTransformKeys,
                       TopicNameMappingKeys):
    target_key: ClassVar[str] = "pulsar.topic"
    follows_routers: ClassVar[bool] = True

    service_url: str = Field(
        alias="pulsar.service.url", json_schema_extra=HIGH_IMPORTANCE, pattern=r"^pulsar(\+ssl)?://",
        description="pulsar://host:6650 or pulsar+ssl://... (the local stack's: PULSAR_SERVICE_URL)")
    topic: TargetTemplate = Field(
        "persistent://public/default/${topic}", alias="pulsar.topic", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the target topic; ${topic} is the Kafka topic (behind a RegexRouter, the topic the router gives "
                    "the record)")
    auth_token: SecretStr | None = Field(None, alias="pulsar.auth.token", json_schema_extra=HIGH_IMPORTANCE,
                                         description="a token (write it as a reference: ${env:...}, ${file:...})")
    send_timeout_ms: int = Field(30_000, alias="pulsar.send.timeout.ms", ge=1_000,
                                 description="a message not acknowledged in this long fails the run in one line; "
                                             "nothing is recorded and the batch is moved again")
    batching_enabled: bool = Field(True, alias="pulsar.batching.enabled", description="the producer batches messages")
    batching_max_messages: int = Field(1000, alias="pulsar.batching.max.messages", ge=1,
                                       description="messages per producer batch at most")
    batching_max_publish_delay_ms: int = Field(10, alias="pulsar.batching.max.publish.delay.ms", ge=0,
                                               description="how long a producer batch waits for more messages")

    def topic_for(self, kafka_topic: str) -> str:
        return self.routed(self.topic, kafka_topic)

    def routed_target_key(self) -> str | None:
        return "pulsar.topic" if is_routed(self.topic) else None
