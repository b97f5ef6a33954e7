"""CloudPubSubSourceConnector: Cloud Pub/Sub -> Kafka."""
