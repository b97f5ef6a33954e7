"""What a chain of Kafka Connect transforms costs the Cloud Pub/Sub sink: the sink's task body (the one a Spark task
runs) publishing 1 KiB records to the stack's pstest, plain and with a chain of three common transforms (InsertHeader,
Filter of tombstones, RegexRouter; again with a TimestampRouter for the router), rows interleaved and each repeated; the cost is the task's CPU time per record
(pstest's own CPU is not counted, and it bounds the wall-clock rate). A third row runs the same chain record by record
(what a chain with a transform that reads fields costs), for scale.
Usage: python -m bench.transforms [--records 20000] [--repeats 5]; writes bench/transforms.json."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench.common import bench_stack, fresh_pubsub, median_spread, write_results
from bench.data import pubsub_topic
from bench.profile_sink import _task, batches

RESULTS = Path(__file__).resolve().parent / "transforms.json"
CHAIN = {"transforms": "source,tombstones,route",
         "transforms.source.type": "org.apache.kafka.connect.transforms.InsertHeader",
         "transforms.source.header": "source", "transforms.source.value.literal": "kafka",
         "transforms.tombstones.type": "org.apache.kafka.connect.transforms.Filter",
         "transforms.tombstones.predicate": "tomb", "predicates": "tomb",
         "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
         "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
         "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1"}
# The same chain and a HoistField that a predicate applies to no record: the output is the same, but a transform that
# reads fields sends the whole chain down the record path.
RECORD_PATH = {**CHAIN, "transforms": "source,tombstones,route,none",
               "transforms.none.type": "org.apache.kafka.connect.transforms.HoistField$Value",
               "transforms.none.field": "f", "transforms.none.predicate": "never",
               "predicates": "tomb,never",
               "predicates.never.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
               "predicates.never.pattern": "no-such-topic"}
# The chain with a TimestampRouter (daily topics) for its router: column-wise too.
DAILY = {**CHAIN, "transforms.route.type": "org.apache.kafka.connect.transforms.TimestampRouter",
         "transforms.route.regex": None, "transforms.route.replacement": None}
DAILY = {key: value for key, value in DAILY.items() if value is not None}
ROWS = {"plain": {}, "three transforms": CHAIN, "three transforms, a TimestampRouter": DAILY,
        "three transforms, record by record": RECORD_PATH}


def _one(name: str, keys: dict, records: int, size: int) -> tuple[float, float]:
    """(records per second, CPU microseconds per record) of one task publishing `records`."""
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
    from connectors.cloud_pubsub_sink.write import pubsub_writer

    pubsub_topic(name, subscribe=False)
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "bench", "cps.topic": name,
                                                   "maxBufferSize": 1000, "maxDelayThresholdMs": 20, **keys})
    task = _task(config, pubsub_writer(config, PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"]), 30))
    data = list(batches(records, size))  # made before the clocks start
    wall, cpu = time.monotonic(), time.process_time()
    list(task(iter(data)))
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    return records / wall, cpu / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    measured: dict[str, list[tuple[float, float]]] = {row: [] for row in ROWS}
    with bench_stack():
        _one("warm-up", {}, 2000, args.size)
        for repeat in range(args.repeats):
            fresh_pubsub()  # pstest slows down with everything it holds
            for index, (row, keys) in enumerate(ROWS.items()):  # interleaved: a slow moment hits every row
                measured[row].append(_one(f"tf-{repeat}-{index}-{os.getpid()}", keys, args.records, args.size))
    plain_cpu = statistics.median(cpu for _, cpu in measured["plain"])
    report = {"records": args.records, "size": args.size, "repeats": args.repeats, "rows": {}}
    print(f"{args.records:,} records of {args.size} B per run, {args.repeats} runs per row (median, min-max)")
    for row, runs in measured.items():
        rates, cpus = [r for r, _ in runs], [c for _, c in runs]
        cost = statistics.median(cpus) / plain_cpu - 1
        report["rows"][row] = {"records_per_s": rates, "cpu_us_per_record": cpus, "cpu_over_plain": cost}
        print(f"  {row:38s} {statistics.median(rates):9,.0f}/s ({min(rates):,.0f}-{max(rates):,.0f})   "
              f"CPU {statistics.median(cpus):6.1f} us/record ({min(cpus):.1f}-{max(cpus):.1f}), "
              f"{cost:+.1%} against plain")
    write_results(RESULTS, report)



def render(results: dict) -> str:
    """Each chain's rate and the task's CPU per record, medians (min-max) of the repeats, beside the plain sink."""
    lines = [f"{results['records']:,} records of {results['size']:,} B per run, {results['repeats']} runs per row, "
             "interleaved. Medians (min-max).", "",
             "| chain | records/s | CPU µs per record | CPU over plain |", "| --- | --- | --- | --- |"]
    for row, r in results["rows"].items():
        lines.append(f"| {row} | {median_spread(r['records_per_s'])} | "
                     f"{median_spread(r['cpu_us_per_record'], '{:.1f}')} | "
                     + ("" if row == "plain" else f"{r['cpu_over_plain']:+.1%}") + " |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
