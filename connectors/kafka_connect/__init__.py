"""Kafka Connect's data model and converters, as the reference connector sees records."""
