"""bridgectl: the local stack (Kafka, Pub/Sub emulator, moto) and the demo around the bridges."""
