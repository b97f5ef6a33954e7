"""PulsarSinkConnector keys: the Pulsar service, the target topic (routed by ${topic}) and how to send."""

from __future__ import annotations

from pydantic import Field, SecretStr

from connectors.config.common import ConnectorConfig, ErrorHandlingKeys, KafkaTopicsKeys
from connectors.config.routing import TargetTemplate, route


class PulsarSinkConfig(ConnectorConfig, KafkaTopicsKeys, ErrorHandlingKeys):
    service_url: str = Field(alias="pulsar.service.url", pattern=r"^pulsar(\+ssl)?://")
    # ${topic} is the Kafka topic: by default each goes to the Pulsar topic of the same name.
    topic: TargetTemplate = Field("persistent://public/default/${topic}", alias="pulsar.topic", min_length=1)
    auth_token: SecretStr | None = Field(None, alias="pulsar.auth.token")
    # A send not acknowledged in this long fails the run (nothing recorded; the batch is moved again).
    send_timeout_ms: int = Field(30_000, alias="pulsar.send.timeout.ms", ge=1_000)
    batching_enabled: bool = Field(True, alias="pulsar.batching.enabled")
    batching_max_messages: int = Field(1000, alias="pulsar.batching.max.messages", ge=1)
    batching_max_publish_delay_ms: int = Field(10, alias="pulsar.batching.max.publish.delay.ms", ge=0)

    def topic_for(self, kafka_topic: str) -> str:
        return route(self.topic, kafka_topic)
