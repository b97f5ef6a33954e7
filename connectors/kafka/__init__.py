"""Kafka access shared by every connector: the admin helper and Spark's Kafka source."""
