"""Kafka access shared by every connector: the admin helper, the range reader, the dead-letter queue."""
