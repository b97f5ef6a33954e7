"""The bridges' figures for Prometheus: `python -m bridge_metrics` serves an OpenMetrics endpoint made from the
Dagster instance's event log (every batch's and every continuous commit's materialization, every check
evaluation), so the figures of runs that have ended are kept and a bridge's counters add up over all its runs.

catalog.py names every metric; folding.py turns one recorded batch into metric changes; event_reader.py follows
the instance; server.py serves the endpoint.
"""
