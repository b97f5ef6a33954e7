"""PubSubLiteSourceConnector: Pub/Sub Lite -> Kafka."""
