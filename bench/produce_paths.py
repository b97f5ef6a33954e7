"""The Cloud Pub/Sub source's Kafka produce path against confluent-kafka's `produce_batch`, outside Spark.

    python -m bench.produce_paths [--records 100000]

Starts a Kafka of its own (free ports, its own directory: it runs beside nothing else of the bench) and writes
`--records` records of 100 B and 1 KiB in pulls of 1,000 with the source's producer settings, each way twice,
alternating: `produce()` per record with the record's timestamp and a delivery callback each (the source's path),
and `produce_batch()` per pull with a callback each. `produce_batch` in confluent-kafka 2.16 takes neither headers
nor timestamps (it raises NotImplementedError for a timestamp), and every source record carries its message's
publish time as its timestamp, as the Java connector's do: the batch rows are what it would gain without them.
Prints records/s and CPU s per 100k of this process for each.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.data import payload

PULL = 1_000


def _write(producer, topic: str, values: list[bytes], batch: bool) -> None:
    delivered = [0]

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered[0] += 1

    stamp = int(time.time() * 1000)
    for start in range(0, len(values), PULL):
        pull = values[start:start + PULL]
        if batch:
            messages = [{"value": value, "callback": on_delivery} for value in pull]
            producer.produce_batch(topic, messages)
            refused = [m["_error"] for m in messages if "_error" in m]
            assert not refused, refused[:1]
        else:
            for value in pull:
                producer.produce(topic, value=value, timestamp=stamp, on_delivery=on_delivery)
        producer.flush()
    assert delivered[0] == len(values), delivered


def main() -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from local_stack.stack import LocalStack

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="produce-paths-") as home:
        stack = LocalStack(Path(home), pick_free_ports=True)
        stack.up(only=("kafka",))
        try:
            servers = stack.env()["KAFKA_BOOTSTRAP_SERVERS"]
            admin = AdminClient({"bootstrap.servers": servers})
            print("| size | path | records/s | CPU s per 100k |\n| --- | --- | --- | --- |")
            for size in (100, 1024):
                values = [payload(size)] * args.records
                for batch in (False, True, False, True):
                    topic = f"produce-paths-{size}-{time.time_ns()}"
                    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
                    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all",
                                         "log_level": 3})
                    producer.list_topics(topic, timeout=30)  # connected before the clock starts
                    cpu, wall = time.process_time(), time.perf_counter()
                    _write(producer, topic, values, batch)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    path = "produce_batch, no timestamps" if batch else "produce per record (the source's)"
                    print(f"| {size} B | {path} | {args.records / wall:,.0f} | {cpu * 100_000 / args.records:.2f} |",
                          flush=True)
                    del producer  # closed before the next row's (and before Kafka stops)
        finally:
            stack.down(only=("kafka",), log=lambda line: None)


if __name__ == "__main__":
    main()
