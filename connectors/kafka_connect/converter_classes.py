"""Kafka Connect's converter class names, as a connector's `key.converter` / `value.converter` keys name them."""

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
# Confluent's Schema Registry converters (connectors.kafka_connect.registry).
AVRO_CONVERTER = "io.confluent.connect.avro.AvroConverter"
PROTOBUF_CONVERTER = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA_CONVERTER = "io.confluent.connect.json.JsonSchemaConverter"
REGISTRY_CONVERTERS = (AVRO_CONVERTER, PROTOBUF_CONVERTER, JSON_SCHEMA_CONVERTER)
KNOWN_CONVERTERS = (STRING_CONVERTER, BYTE_ARRAY_CONVERTER, JSON_CONVERTER, *REGISTRY_CONVERTERS)
