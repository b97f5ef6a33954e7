"""Kafka client code shared by every connector: how to reach a cluster (connection.py, client_keys.py), the admin
helper (admin.py), the range reader of the Spark tasks (range_reader.py), the dead-letter queue (dead_letter.py),
Kafka transactions for exactly once (transactions.py), and an outage's one-line error (outages.py)."""
