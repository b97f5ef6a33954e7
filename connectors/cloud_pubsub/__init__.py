"""Cloud Pub/Sub clients shared by the sink and the source."""
