"""The MirrorMaker 2 bench's table: medians with min-max, the ratios of medians, ours against the brokers' limit."""

from bench.kafka_sink_versus_mirrormaker import LIMIT_BY_TOOLS, mirror_config, render
from bench.limits import consumer_performance_rate


def _row(rate: float, cpu_per_100k: float) -> dict:
    return {"records": 1_000_000, "seconds": 1_000_000 / rate, "cpu_per_100k": cpu_per_100k}


def _results(ours: list[dict], mirrormaker: list[dict]) -> dict:
    return {"date": "2026-11-28", "cores": 2, "records": 1_000_000, "size": 1024, "rounds": 3,
            "brokers_limit": {"consume": 200_000, "produce": 100_000}, "ours": ours, "mirrormaker": mirrormaker}


def test_the_ratios_are_of_medians_and_ours_is_held_against_the_lower_broker_limit():
    table = render(_results([_row(r, 2.0) for r in (80_000, 90_000, 70_000)],
                            [_row(r, 5.0) for r in (30_000, 25_000, 35_000)]))
    assert "**2.67x** the records/s" in table and "**0.40x** the CPU" in table
    assert "**0.80x** the lower of the brokers' limits" in table
    assert "| ours | 80,000 (70,000-90,000) | 2.00 (2.00-2.00) |" in table
    assert "overlap" not in table


def test_overlapping_spreads_are_said():
    table = render(_results([_row(r, 2.0) for r in (30_000, 60_000, 40_000)],
                            [_row(r, 2.0) for r in (35_000, 50_000, 45_000)]))
    assert "The two spreads overlap" in table


def test_mirrormaker_copies_bytes_as_they_are_and_keeps_the_target_topics_own_settings(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("KAFKA_TARGET_BOOTSTRAP_SERVERS", "127.0.0.1:2")
    config = mirror_config("row0", "orders")
    assert config["key.converter"] == config["value.converter"] == \
        "org.apache.kafka.connect.converters.ByteArrayConverter"
    # the target topic is made with LogAppendTime for the row's arrival span; synced configs would undo that
    assert config["sync.topic.configs.enabled"] == "false"
    assert (config["source.cluster.bootstrap.servers"], config["target.cluster.bootstrap.servers"]) == \
        ("127.0.0.1:1", "127.0.0.1:2")


def test_the_always_on_row_has_its_own_line_and_ratio():
    results = _results([_row(r, 2.0) for r in (80_000, 90_000, 70_000)],
                       [_row(r, 5.0) for r in (30_000, 25_000, 35_000)])
    table = render({**results, "ours_always_on": [_row(r, 1.0) for r in (100_000, 120_000, 110_000)]})
    assert "| ours, always on | 110,000 (100,000-120,000) | 1.00 (1.00-1.00) |" in table
    assert "Always on ÷ MirrorMaker 2: **3.67x** the records/s at **0.20x** the CPU per record." in table
    assert "Always on" not in render(results)


def test_the_comparisons_table_leaves_out_a_side_its_results_file_does_not_hold(tmp_path):
    import json

    from bench.comparisons import table

    results = {**_results([_row(90_000, 2.0)], [_row(30_000, 5.0)]), "rounds": 1}
    (tmp_path / "kafka_sink_versus_mirrormaker.json").write_text(json.dumps(results))
    rows = table(tmp_path).splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == ["| Kafka sink (Kafka -> Kafka), one micro-batch, 1 KiB"]
    (tmp_path / "kafka_sink_versus_mirrormaker.json").write_text(
        json.dumps({**results, "ours_always_on": [_row(120_000, 1.0)]}))
    assert len(table(tmp_path).splitlines()[2:]) == 2


def test_rows_shorter_than_twenty_seconds_are_named():
    short = render(_results([_row(r, 2.0) for r in (80_000, 90_000, 70_000)],  # 11-14 s each
                            [_row(r, 5.0) for r in (30_000, 25_000, 35_000)]))  # 29-40 s each
    assert "Rows shorter than 20 s of copying (medians): ours 12.5 s; raise --records" in short
    steady = render(_results([_row(r, 2.0) for r in (40_000, 45_000, 35_000)],
                             [_row(r, 5.0) for r in (30_000, 25_000, 35_000)]))
    assert "Rows shorter" not in steady


def test_the_whole_command_names_its_own_size():
    results = _results([_row(90_000, 2.0)], [{**_row(30_000, 5.0), "command_seconds": 12.0}])
    results["ours_command"] = [{"records": 500_000, "seconds": 6.0, "to_last_arrival": 5.5}]
    table = render(results)
    assert "The whole command copying 500,000 records" in table
    assert "MirrorMaker 2's time ÷ ours to the command's exit: **2.00x** (target 2x)." in table


def test_the_limit_row_says_who_measured_it():
    rows = ([_row(r, 2.0) for r in (80_000, 90_000, 70_000)], [_row(r, 5.0) for r in (30_000, 25_000, 35_000)])
    assert "the brokers' limit (librdkafka from a Python loop)" in render(_results(*rows))
    measured_by_tools = {**_results(*rows), "brokers_limit_by": LIMIT_BY_TOOLS}
    assert f"the brokers' limit ({LIMIT_BY_TOOLS}): one consumer" in render(measured_by_tools)


def test_the_rate_is_read_from_kafkas_consumer_perf_tool_output():
    consumer = ("WARNING: the group's coordinator was slow, retrying\n"
                "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
                "2026-12-03 18:30:00:000, 2026-12-03 18:30:10:000, 3906.2500, 390.6250, 4000000, 400000.0000, 3012, "
                "6988, 558.9900, 572409.8455\n")
    assert consumer_performance_rate(consumer) == 572409.8455
