"""The MirrorMaker 2 bench's table: medians with min-max, the ratios of medians, ours against the brokers' limit."""

from bench.kafka_sink_versus_mirrormaker import mirror_config, render


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
