"""Kafka Connect's single message transforms and predicates (Apache Kafka's connect-transforms), by their class names
and keys, run where a Kafka Connect worker runs them."""
