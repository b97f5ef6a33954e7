"""Dagster resources: the shared systems (Kafka, Pub/Sub, Pub/Sub Lite, Spark) a connector plugin lists in
`ConnectorPlugin.systems`, by those names, each a thin wrapper handing connection settings to the Dagster-free
connectors."""

from resources.defaults import default_resources
from resources.kafka import KafkaResource
from resources.lease import BridgeLeaseResource
from resources.pubsub import PubSubResource
from resources.pubsublite import PubSubLiteResource
from resources.spark import SparkResource

__all__ = [
    "BridgeLeaseResource", "KafkaResource", "PubSubLiteResource", "PubSubResource", "SparkResource", "default_resources",
]
