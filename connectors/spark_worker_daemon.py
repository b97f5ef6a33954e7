"""Spark's Python worker daemon (pyspark.daemon), started without Spark's archives on sys.path.

Why: Spark puts its pyspark.zip, its py4j zip and its spark-core jar on the workers' PYTHONPATH, and
pyspark's worker calls importlib.invalidate_caches() at the start of every task, which makes zipimport
read each archive's directory again, once per package imported from it: about a tenth of a second of
CPU per task on these machines, most of a small batch's Python time. The same pyspark and py4j are
installed in this interpreter's site-packages (a pip-installed pyspark is what runs here), so the
workers import them from there. The workers fork from this daemon and inherit its sys.path; archives
a job ships itself (--py-files) are added per task after this and are left alone.
ENGINE_CONF names this module as spark.python.daemon.module.
"""

import os
import runpy
import sys


def is_spark_archive(entry: str) -> bool:
    name = os.path.basename(entry)
    return name.endswith(".jar") or name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


if __name__ == "__main__":
    sys.path[:] = [entry for entry in sys.path if not is_spark_archive(entry)]
    sys.path_importer_cache.clear()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
