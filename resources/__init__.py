"""Dagster resources: thin wrappers that hand connection settings to the Dagster-free connectors."""

from resources.connectors import (
    CloudPubSubSinkResource, CloudPubSubSourceResource, PubSubLiteSinkResource, PubSubLiteSourceResource,
    S3BlockGzipSinkResource,
)
from resources.defaults import default_resources
from resources.kafka import KafkaResource
from resources.lease import BridgeLeaseResource
from resources.pubsub import PubSubResource
from resources.pubsublite import PubSubLiteResource
from resources.spark import SparkResource

__all__ = [
    "BridgeLeaseResource", "CloudPubSubSinkResource", "CloudPubSubSourceResource", "KafkaResource", "PubSubLiteResource",
    "PubSubLiteSinkResource", "PubSubLiteSourceResource", "PubSubResource", "S3BlockGzipSinkResource", "SparkResource", "default_resources",
]
