"""Shared by both Pub/Sub Lite connectors: how to reach the service."""
