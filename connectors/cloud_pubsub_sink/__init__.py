"""CloudPubSubSinkConnector: Kafka -> Cloud Pub/Sub."""
