"""PubSubLiteSinkConnector: Kafka -> Pub/Sub Lite."""
