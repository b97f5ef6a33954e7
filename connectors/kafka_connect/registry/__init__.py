"""Confluent's Schema Registry converters (Avro, Protobuf, JSON Schema) with Kafka Connect's class names.

`settings` holds the converter keys, `wire` the Confluent wire format and subject names, `client` the
registry connection, one `*_data` module per format maps that format's schemas and values to Connect's
data model and back, and `converters` joins them into Kafka Connect converters.
"""
