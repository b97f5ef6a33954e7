"""The side-by-side comparisons against a reference (the warm Java worker, MirrorMaker 2) as one Markdown table, read
from the results files their benches write: per row, both sides' records/s at the median of the rounds with the
min-max, the ratio of the medians, the CPU seconds per 100,000 records at the median, the target, and when, where and
at which commit the rows ran. It is kept in bench/comparisons.md (rewritten by each of these benches, and by
`python -m bench.comparisons`), which the Measured page and the README take whole (`python -m bridgectl.generated_docs`):
a figure there is the one its results file holds, and the suite fails when they differ."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.common import rounds_summary, stamp

HERE = Path(__file__).resolve().parent
TABLE_FILE = HERE / "comparisons.md"


@dataclass(frozen=True)
class Comparison:
    """One row: `ours` against `reference`, two sides (lists of rounds) of the results file `results`."""

    bridge: str
    results: str
    ours: str
    reference: str
    reference_name: str
    times: float  # the target: at least this many times the reference's records/s ...
    cpu_share: float  # ... at at most this share of its CPU per record


# The targets are the issues' (#61: 2x a warm Java worker at half its CPU; 3x MirrorMaker 2 at 0.4x its CPU).
COMPARISONS = (
    Comparison("Cloud Pub/Sub sink, one micro-batch, 1 KiB", "cloud_pubsub_on_counter_sink.json", "ours", "java",
               "Java 1.3.3, warm", 2.0, 0.5),
    Comparison("Cloud Pub/Sub sink, always on (`tasks.max=2`), 1 KiB", "cloud_pubsub_on_counter_sink.json",
               "ours_always_on", "java", "Java 1.3.3, warm", 2.0, 0.5),
    Comparison("Cloud Pub/Sub sink, one micro-batch, 100 B", "cloud_pubsub_on_counter_sink_100b.json", "ours", "java",
               "Java 1.3.3, warm", 2.0, 0.5),
    Comparison("Cloud Pub/Sub sink, always on (`tasks.max=2`), 100 B", "cloud_pubsub_on_counter_sink_100b.json",
               "ours_always_on", "java", "Java 1.3.3, warm", 2.0, 0.5),
    Comparison("Cloud Pub/Sub source, one micro-batch, 1 KiB", "cloud_pubsub_on_counter_source.json", "ours", "java",
               "Java 1.3.3, warm", 2.0, 0.5),
    Comparison("Kafka sink (Kafka -> Kafka), one micro-batch, 1 KiB", "kafka_sink_versus_mirrormaker.json", "ours",
               "mirrormaker", "MirrorMaker 2 (connect-mirror 4.1.1), warm", 3.0, 0.4),
    Comparison("Kafka sink (Kafka -> Kafka), one micro-batch, 100 B", "kafka_sink_versus_mirrormaker_100b.json",
               "ours", "mirrormaker", "MirrorMaker 2 (connect-mirror 4.1.1), warm", 3.0, 0.4),
    Comparison("Kafka sink (Kafka -> Kafka), always on (`tasks.max=2`), 1 KiB", "kafka_sink_versus_mirrormaker.json",
               "ours_always_on", "mirrormaker", "MirrorMaker 2 (connect-mirror 4.1.1), warm", 3.0, 0.4),
    Comparison("Kafka sink (Kafka -> Kafka), always on (`tasks.max=2`), 100 B",
               "kafka_sink_versus_mirrormaker_100b.json", "ours_always_on", "mirrormaker",
               "MirrorMaker 2 (connect-mirror 4.1.1), warm", 3.0, 0.4),
    Comparison("Kafka sink (Kafka -> Kafka), one micro-batch, 1 KiB, both exactly once",
               "kafka_sink_versus_mirrormaker_exactly_once.json", "ours", "mirrormaker",
               "MirrorMaker 2 (connect-mirror 4.1.1), warm, exactly once (KIP-618)", 3.0, 0.4),
    Comparison("Kafka sink (Kafka -> Kafka), always on (`tasks.max=2`), 1 KiB, both exactly once",
               "kafka_sink_versus_mirrormaker_exactly_once.json", "ours_always_on", "mirrormaker",
               "MirrorMaker 2 (connect-mirror 4.1.1), warm, exactly once (KIP-618)", 3.0, 0.4),
)

HEADER = ("| bridge | reference | ours, records/s | reference, records/s | × reference | CPU s per 100k: ours / "
          "reference (÷) | target | met | measured |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def _rate(summary: dict) -> str:
    return f"{summary['rate_median']:,.0f} ({summary['rate_min']:,.0f}-{summary['rate_max']:,.0f})"


def row(comparison: Comparison, results: dict) -> str:
    ours, reference = rounds_summary(results[comparison.ours]), rounds_summary(results[comparison.reference])
    times = ours["rate_median"] / reference["rate_median"]
    cpu_share = ours["cpu_median"] / reference["cpu_median"]
    met = times >= comparison.times and cpu_share <= comparison.cpu_share
    return (f"| {comparison.bridge} | {comparison.reference_name} | {_rate(ours)} | {_rate(reference)} | "
            f"{times:.2f} | {ours['cpu_median']:.2f} / {reference['cpu_median']:.2f} ({cpu_share:.2f}) | "
            f"{comparison.times:g}× at ≤ {comparison.cpu_share:g}× CPU | {'met' if met else '**missed**'} | "
            f"{stamp(results)}, {results['rounds']} rounds (`bench/{comparison.results}`) |")


def table(directory: Path = HERE) -> str:
    """Every comparison whose results file is there and holds its side, in the order of COMPARISONS."""
    files = {c.results: json.loads((directory / c.results).read_text()) for c in COMPARISONS
             if (directory / c.results).exists()}
    rows = [row(c, files[c.results]) for c in COMPARISONS if c.ours in files.get(c.results, {})]
    return "\n".join([HEADER, *rows]) + "\n"


def write_table() -> None:
    TABLE_FILE.write_text(table())


if __name__ == "__main__":
    write_table()
    print(TABLE_FILE.read_text(), end="")
