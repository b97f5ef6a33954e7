"""Moving a Pub/Sub Lite topic to Kafka before Lite shuts down: its retained messages, partition by partition in
order, and each subscription's place as a Kafka consumer group's offset (`bridgectl lite migrate`)."""
