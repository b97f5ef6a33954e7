"""Connector logic, free of Dagster: config, conversion, reading and writing.

Everything here can run inside Spark executors and be unit-tested on its own.
"""
