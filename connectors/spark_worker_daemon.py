"""Spark's Python worker daemon (pyspark.daemon), started without Spark's archives on sys.path.

Why: Spark puts its pyspark.zip, its py4j zip and its spark-core jar on the workers' PYTHONPATH, and
pyspark's worker calls importlib.invalidate_caches() at the start of every task, which makes zipimport
read each archive's directory again, once per package imported from it: about a tenth of a second of
CPU per task on these machines, most of a small batch's Python time. The same pyspark and py4j are
installed in this interpreter's site-packages (a pip-installed pyspark is what runs here), so the
workers import them from there. The workers fork from this daemon and inherit its sys.path; archives
a job ships itself (--py-files) are added per task after this and are left alone.
ENGINE_CONF names this module as spark.python.daemon.module.

Also why: pyspark's daemon calls gc.collect() in a reused worker after every task, a full collection over every
object the worker's imports made (pyarrow, the Google and Kafka clients): py-spy put 80 % of a micro-batch
bridge's worker CPU there (the demo's archive, 20 records a second). The workers here freeze what survives each
collection, so the next one walks only what later tasks made. Objects still die by their reference counts as
before; only a cycle that outlived a task and died later stays (never seen to matter in a worker's life).
"""

import gc
import os
import sys


def is_spark_archive(entry: str) -> bool:
    name = os.path.basename(entry)
    return name.endswith(".jar") or name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


class _CollectThenFreeze:
    """pyspark.daemon's `gc`: collect() freezes what survived."""

    def __getattr__(self, name: str):
        return getattr(gc, name)

    @staticmethod
    def collect(*args) -> int:
        found = gc.collect(*args)
        gc.freeze()
        return found


if __name__ == "__main__":
    sys.path[:] = [entry for entry in sys.path if not is_spark_archive(entry)]
    sys.path_importer_cache.clear()
    import pyspark.daemon

    pyspark.daemon.gc = _CollectThenFreeze()
    pyspark.daemon.manager()
