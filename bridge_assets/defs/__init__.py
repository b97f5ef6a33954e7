"""Dagster's defs folder for this project (dg.toml's defs_module): one component, the bridges file."""
