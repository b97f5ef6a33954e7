"""`python -m local_stack.spark_first_query <remote>`: runs one query on a Spark Connect server; exit 0 if it answered.

A process of its own: a Spark Connect client sets process-wide state (pyspark's Connect mode) that would turn the
caller's later classic sessions into Connect ones.
"""

from __future__ import annotations

import sys


def main(remote: str) -> int:
    from pyspark.sql import SparkSession

    from connectors.spark_session import with_bounded_retries

    spark = with_bounded_retries(SparkSession.builder.remote(remote).create())
    try:
        spark.range(1, numPartitions=1).collect()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
