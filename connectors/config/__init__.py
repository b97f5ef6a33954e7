"""Bridge configuration: connector keys as Kafka Connect names them, validated with pydantic."""
