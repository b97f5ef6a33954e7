"""A local Pub/Sub Lite server: Google never shipped an emulator, so we speak the real gRPC API ourselves.

Messages are the proto types shipped in google-cloud-pubsublite; state lives in one SQLite file so
it survives `bridgectl local down` / `up` like the local Kafka does.
"""
