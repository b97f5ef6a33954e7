"""The Measured page (docs/measured.md), written whole from the benches' results files: the comparisons against the
references (bench/comparisons.md), then a section per bench with how it measures (its module's docstring), and a
table per results file drawn by the bench's own `render`, each stamped with its date, machine and commit; last, the
full run's tables (bench/results.md, written by `python -m bench`). `python -m bridgectl.generated_docs` writes the
page; the suite fails when the committed page differs from what the results files say."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path

from bench.common import stamp

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Section:
    title: str
    module: str  # the bench (bench.<module>): its docstring says how it measures, its `render` draws each file
    files: tuple[str, ...]  # its results files under bench/, the newest of each configuration it is run in


SECTIONS = (
    Section("The Cloud Pub/Sub sink and source beside the Java connector, no emulator between",
            "cloud_pubsub_on_counter", ("cloud_pubsub_on_counter_sink.json", "cloud_pubsub_on_counter_sink_100b.json",
                                        "cloud_pubsub_on_counter_source.json")),
    Section("The Kafka sink beside MirrorMaker 2", "kafka_sink_versus_mirrormaker",
            ("kafka_sink_versus_mirrormaker.json", "kafka_sink_versus_mirrormaker_100b.json",
             "kafka_sink_versus_mirrormaker_exactly_once.json")),
    Section("Against the Java connector on the emulators", "versus_java",
            ("versus_java.json", "versus_java_source.json", "versus_java_lite.json")),
    Section("Always on: latency at a steady rate", "continuous",
            ("continuous_lease_check.json", "continuous_cloud_java.json", "continuous_three_runs.json",
             "continuous_kinesis_pulsar.json", "continuous_archive_stream.json")),
    Section("Always on: the highest rate kept", "sustained", ("sustained.json",)),
    Section("Which long-lived shape on Spark", "streaming_shapes", ("streaming_shapes.json",)),
    Section("Many always-on bridges", "fleet", ("fleet.json", "fleet_30.json", "fleet_batch.json")),
    Section("A host's bridges beside one that fails", "fleet_failing", ("fleet_failing.json",)),
    Section("How long a killed run's work goes on", "kill_stop", ("kill_stop_stream_link.json", "kill_stop_run_link.json")),
    Section("Exactly once: what it costs in a micro-batch", "exactly_once", ("exactly_once.json",)),
    Section("Exactly once always on: latency", "exactly_once_always_on", ("exactly_once_always_on.json",)),
    Section("Exactly once always on: throughput", "exactly_once_throughput", ("exactly_once_throughput.json",)),
    Section("Transforms on the Cloud Pub/Sub sink", "transforms", ("transforms.json",)),
    Section("The warm engine over many runs", "engine_resources", ("engine_resources.json",)),
)

INTRO = """# Measured

Every table here is drawn from a results file under `bench/` by the bench that wrote it, and stamped with the date,
the machine (cores, memory) and the commit it ran at (files written before the benches stamped themselves name the
commit that recorded them). A row repeated in rounds shows its median and, in brackets, its min-max. The page is
written by `python -m bridgectl.generated_docs`; run a bench again (the command under its title) and regenerate to
bring a table up to date. Why a target is missed is in [Known limitations](known-limitations.md).

## Against the references, side by side

"""


def section(entry: Section, directory: Path = HERE) -> str:
    module = importlib.import_module(f"bench.{entry.module}")
    parts = [f"## {entry.title}\n", _how(module.__doc__ or "")]
    for name in entry.files:
        path = directory / name
        if not path.exists():
            parts.append(f"`bench/{name}`: not measured yet.\n")
            continue
        results = json.loads(path.read_text())
        drawn = module.render(results)
        drawn = "\n".join(drawn) + "\n" if isinstance(drawn, list) else drawn
        command = f", `{results['command']}`" if "command" in results else ""
        parts.append(f"`bench/{name}`: {stamp(results)}{command}.\n\n{drawn}")
    return "\n".join(parts)


def _how(docstring: str) -> str:
    """A bench's docstring as the page's prose: its indented usage lines (and `Usage:` lines) as code blocks."""
    out: list[str] = []
    for line in docstring.strip().splitlines():
        if line.startswith("Usage: "):
            line = "    " + line.removeprefix("Usage: ").split(";")[0]
        if line.startswith("    ") and not line.startswith("    -"):
            if out and out[-1] == "```":
                out.pop()  # the block above goes on
            else:
                out.append("```")
            out += [line[4:], "```"]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def page(directory: Path = HERE) -> str:
    results = (directory / "results.md").read_text()
    full_run = "## The last full run\n\n" + _how(importlib.import_module("bench.__main__").__doc__)
    return "\n".join([INTRO + (directory / "comparisons.md").read_text(),
                      *(section(entry, directory) for entry in SECTIONS),
                      full_run + "\n" + results])
