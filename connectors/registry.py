"""The connector kinds a bridge can name, by the reference connector's class names."""

from __future__ import annotations

from dataclasses import dataclass

from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.config.common import ConnectorConfig
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig


@dataclass(frozen=True)
class ConnectorKind:
    name: str
    java_class: str
    config_model: type[ConnectorConfig] | None  # None: named in the product, not built yet
    kinds: tuple[str, ...]  # Dagster kind tags shown in the UI


CONNECTOR_KINDS = {
    kind.name: kind
    for kind in (
        ConnectorKind("CloudPubSubSinkConnector", "com.google.pubsub.kafka.sink.CloudPubSubSinkConnector",
                      CloudPubSubSinkConfig, ("kafka", "pubsub", "spark")),
        ConnectorKind("CloudPubSubSourceConnector", "com.google.pubsub.kafka.source.CloudPubSubSourceConnector",
                      CloudPubSubSourceConfig, ("pubsub", "kafka", "spark")),
        ConnectorKind("PubSubLiteSinkConnector", "com.google.pubsublite.kafka.sink.PubSubLiteSinkConnector",
                      PubSubLiteSinkConfig, ("kafka", "pubsub", "spark")),
        ConnectorKind("S3BlockGzipSinkConnector", "bridge.s3.S3BlockGzipSinkConnector",
                      S3BlockGzipSinkConfig, ("kafka", "s3", "spark")),
        ConnectorKind("PubSubLiteSourceConnector", "com.google.pubsublite.kafka.source.PubSubLiteSourceConnector",
                      PubSubLiteSourceConfig, ("pubsub", "kafka", "spark")),
    )
}


def kind_for(name_or_class: str) -> ConnectorKind | None:
    """Accept the short name or the Java class name a .properties file carries."""
    short = name_or_class.rsplit(".", 1)[-1]
    return CONNECTOR_KINDS.get(short)
