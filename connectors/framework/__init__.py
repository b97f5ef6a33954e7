"""The framework every connector runs in, as a Kafka Connect worker is for its connectors: how a bridge's work runs
on Spark, in micro-batches and always on, and how its run and its tasks stay tied. Connectors import it; it imports
Kafka client code (connectors/kafka) and never a connector.

- Micro-batches of a Kafka-reading bridge: spark_read.py runs one Spark task per planned offset range, each under the
  batch's lease (batch_lease.py) and tied to its run (run_liveness.py), handing its records to the connector's
  delivery; sink_batch.py plans a sink's batch and reports where it got to.
- Always on: leased_job.py is a stream's long-running Spark job and its restarts, stream_jobs.py and stream_slots.py
  run the streams' tasks (one job for many bridges in a host), stream_lease.py is the lease between a run and its
  tasks, stream_report.py what tasks without a Kafka position of their own tell the run.
- The Kafka-reading sinks' driver: a sink declares a writer (sink_writer.SinkWriter, Kafka Connect's SinkTask in
  columnar form) and its plugin with sink_plugin.KafkaSink.plugin; the framework reads, counts (sink_tally.py),
  applies errors.tolerance and the dead-letter queue, measures latency (latency.py), commits what the target
  acknowledged (delivered.py) and records the positions, in batches (sink_batch.py) and always on (sink_stream.py,
  stream_task.py). plugin_parts.py holds what the Kafka-facing plugins declare alike (the offsets position, the lag
  signal).
"""
