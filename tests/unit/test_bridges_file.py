import textwrap

import pytest

from connectors.bridges_file import BridgeConfigError, load_bridges


def write(tmp_path, body: str, name="bridges.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


SINK = """
    bridges:
      - name: orders
        connector: CloudPubSubSinkConnector
        config:
          topics: a, b
          cps.project: p
          cps.topic: t
"""


def test_inline_config_gets_the_seed_defaults(tmp_path):
    [bridge] = load_bridges(write(tmp_path, SINK))
    cfg = bridge.config
    assert bridge.name == "orders" and bridge.connector == "CloudPubSubSinkConnector"
    assert cfg.topic_list() == ["a", "b"]
    assert (cfg.max_buffer_size, cfg.max_buffer_bytes, cfg.delay_ms) == (100, 9_500_000, 100)
    assert (cfg.max_request_timeout_ms, cfg.max_total_timeout_ms) == (10_000, 60_000)
    assert cfg.cps_endpoint == "pubsub.googleapis.com:443"
    assert cfg.message_body_name == "cps_message_body" and cfg.ordering_key_source == "none"
    assert bridge.consumer_group == "connect-orders"
    assert bridge.batch.max_records == 100_000 and bridge.sensor.enabled


def test_properties_file_is_read_unchanged(tmp_path):
    write(tmp_path, """\
        name=CPSSinkConnector
        connector.class=com.google.pubsub.kafka.sink.CloudPubSubSinkConnector
        tasks.max=10
        topics=my-kafka-topic
        cps.topic=my-cps-topic
        cps.project=my-project
        delayThresholdMs=250
        metadata.publish=true
        value.converter=org.apache.kafka.connect.json.JsonConverter
        value.converter.schemas.enable=false
    """, name="cps-sink-connector.properties")
    [bridge] = load_bridges(write(tmp_path, """
        bridges:
          - properties: cps-sink-connector.properties
    """))
    assert bridge.name == "CPSSinkConnector" and bridge.connector == "CloudPubSubSinkConnector"
    assert bridge.config.delay_ms == 250 and bridge.config.metadata_publish is True
    assert bridge.config.value_converter_schemas_enable is False


def test_every_problem_is_reported_with_bridge_and_key(tmp_path):
    with pytest.raises(BridgeConfigError) as err:
        load_bridges(write(tmp_path, """
            bridges:
              - name: one
                connector: CloudPubSubSinkConnector
                config: {topics: x, cps.project: p, cps.topik: t, maxTotalTimeoutMs: 5}
              - name: two
                connector: FooSinkConnector
                config: {}
        """))
    message = str(err.value)
    assert "bridge 'one': key 'cps.topik': unknown key (did you mean 'cps.topic'?)" in message
    assert "bridge 'one': key 'cps.topic': required, not set" in message
    assert "bridge 'one': key 'maxTotalTimeoutMs': Input should be greater than or equal to 10000" in message
    assert "bridge 'two': key 'connector': unknown connector 'FooSinkConnector'; installed: " \
           "CloudPubSubSinkConnector, CloudPubSubSourceConnector" in message


def test_secret_values_never_appear_in_errors(tmp_path):
    with pytest.raises(BridgeConfigError) as err:
        load_bridges(write(tmp_path, """
            bridges:
              - name: s
                connector: CloudPubSubSinkConnector
                config: {topics: x, cps.project: p, cps.topic: t, gcp.credentials.json: [hunter2-secret]}
        """))
    assert "gcp.credentials.json" in str(err.value) and "hunter2" not in str(err.value)


def test_a_secret_reference_is_resolved_where_it_is_used_not_when_the_file_loads(tmp_path, monkeypatch):
    """Kafka Connect's env provider syntax. The code location (webserver, daemon) keeps the reference only;
    the run or sensor that uses the bridge resolves it."""
    path = write(tmp_path, SINK.replace("cps.topic: t", "cps.topic: t\n          gcp.credentials.json: ${env:CREDS}"))
    [bridge] = load_bridges(path)  # CREDS is not set: loading does not need it
    assert bridge.config.gcp_credentials_json.get_secret_value() == "${env:CREDS}"
    with pytest.raises(ValueError, match="key 'gcp.credentials.json': environment variable CREDS is not set"):
        bridge.with_secrets()
    monkeypatch.setenv("CREDS", '{"type": "service_account"}')
    resolved = bridge.with_secrets()
    assert resolved.config.gcp_credentials_json.get_secret_value() == '{"type": "service_account"}'
    assert "service_account" not in repr(resolved.config) and resolved.config.cps_topic == "t"


@pytest.mark.parametrize("extra, problem", [
    ("topics.regex: 'a.*'", "set exactly one of 'topics' and 'topics.regex'"),
    ("maxBufferSize: 1001", "key 'maxBufferSize'"),
    ("maxBufferBytes: 9500001", "key 'maxBufferBytes'"),
    ("orderingKeySource: offset", "key 'orderingKeySource'"),
    ("maxDelayThresholdMs: 5\n          delayThresholdMs: 6", "same setting"),
    ("errors.deadletterqueue.topic.name: dlq", "needs errors.tolerance=all"),
    ("value.converter: com.example.AvroConverter", "key 'value.converter'"),
])
def test_out_of_range_and_conflicting_values_fail_at_load(tmp_path, extra, problem):
    with pytest.raises(BridgeConfigError, match="bridge 'orders'") as err:
        load_bridges(write(tmp_path, SINK + f"          {extra}\n"))
    assert problem in str(err.value)


def test_duplicate_names_and_bad_asset_names(tmp_path):
    with pytest.raises(BridgeConfigError, match="name used twice"):
        load_bridges(write(tmp_path, SINK + SINK.split("bridges:")[1]))
    with pytest.raises(BridgeConfigError, match="letters, digits and underscores"):
        load_bridges(write(tmp_path, SINK.replace("name: orders", "name: my-orders")))


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(BridgeConfigError, match="bridges file not found"):
        load_bridges(tmp_path / "nope.yaml")


def test_source_config_defaults_and_errors(tmp_path):
    [bridge] = load_bridges(write(tmp_path, """
        bridges:
          - name: back
            connector: com.google.pubsub.kafka.source.CloudPubSubSourceConnector
            config: {cps.project: p, cps.subscription: s, kafka.topic: t}
    """))
    cfg = bridge.config
    assert (cfg.cps_max_batch_size, cfg.kafka_partition_count, cfg.kafka_partition_scheme) == (100, 1, "round_robin")
    assert (cfg.streaming_pull_flow_control_messages, cfg.streaming_pull_flow_control_bytes) == (1000, 100 * 2**20)
    assert cfg.cps_endpoint == "pubsub.googleapis.com:443" and cfg.kafka_record_headers is False
    with pytest.raises(BridgeConfigError) as err:
        load_bridges(write(tmp_path, """
            bridges:
              - name: back
                connector: CloudPubSubSourceConnector
                config: {cps.project: p, cps.subscription: s, kafka.partition.scheme: random, cps.maxBatchSize: 0}
        """))
    message = str(err.value)
    assert "bridge 'back': key 'kafka.topic': required, not set" in message
    assert "bridge 'back': key 'kafka.partition.scheme'" in message
    assert "bridge 'back': key 'cps.maxBatchSize'" in message


def test_cps_use_emulator_key_loads_and_names_the_emulator(monkeypatch):
    """An unchanged file of the reference's newer releases may carry cps.useEmulator=true."""
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
    from resources.pubsub import PubSubResource

    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c",
                                                   "cps.useEmulator": "true"})
    assert config.cps_use_emulator
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:8681")
    assert PubSubResource().connection_for(config).emulator_host == "127.0.0.1:8681"
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")
    with pytest.raises(ValueError, match="cps.useEmulator is true but no emulator is named"):
        PubSubResource().connection_for(config)
    assert PubSubResource().connection_for(CloudPubSubSinkConfig.model_validate(
        {"topics": "t", "cps.project": "p", "cps.topic": "c"})).emulator_host is None


def test_typos_in_the_entry_and_its_sections_get_did_you_mean(tmp_path):
    path = write(tmp_path, """\
        bridges:
          - name: b
            connector: CloudPubSubSinkConnector
            mdoe: continuous
            config: {topics: t, cps.project: p, cps.topic: t}
            continuous: {commit_intervall_ms: 1000}
            batch: {max_record: 5}
        """)
    with pytest.raises(BridgeConfigError) as exc:
        load_bridges(path)
    message = str(exc.value)
    assert "key 'mdoe': unknown key (did you mean 'mode'?)" in message
    assert "key 'continuous.commit_intervall_ms': unknown key (did you mean 'continuous.commit_interval_ms'?)" in message
    assert "key 'batch.max_record': unknown key (did you mean 'batch.max_records'?)" in message


def test_invalid_yaml_is_one_line_with_file_line_and_column(tmp_path):
    path = tmp_path / "bridges.yaml"
    path.write_text("bridges:\n  - name: a\n    config: {topics: x\n  - name: b\n")
    with pytest.raises(BridgeConfigError) as err:
        load_bridges(path)
    message = str(err.value)
    assert "\n" not in message
    assert message == f"{path}:4:9: not valid YAML: while parsing a flow mapping expected ',' or '}}', but got ':'"


def test_group_and_check_bounds_are_read_and_checked(tmp_path):
    [bridge] = load_bridges(write(tmp_path, SINK.rstrip() + "\n        group: orders\n        checks: {max_lag: 7}\n"))
    assert bridge.group == "orders" and bridge.max_lag == 7 and bridge.checks.max_age_minutes == 10
    with pytest.raises(BridgeConfigError, match=r"key 'checks.max_lagg': unknown key \(did you mean 'checks.max_lag'\?\)"):
        load_bridges(write(tmp_path, SINK.rstrip() + "\n        checks: {max_lagg: 7}\n"))


def test_a_target_template_names_only_the_topic_and_many_topics_need_it(tmp_path):
    path = tmp_path / "routing.yaml"
    path.write_text(textwrap.dedent("""\
        bridges:
          - name: x
            connector: CloudPubSubSinkConnector
            config: {topics: t, cps.project: p, cps.topic: "k-${topik}"}
          - name: y
            connector: KafkaSinkConnector
            config: {topics.regex: "a.*", target.bootstrap.servers: "h:1", topic.rename.format: fixed}
        """))
    with pytest.raises(BridgeConfigError) as err:
        load_bridges(path)
    assert "bridge 'x': key 'cps.topic': the only placeholder is ${topic} (got 'k-${topik}')" in str(err.value)
    assert "bridge 'y': several source topics need ${topic} in topic.rename.format" in str(err.value)


def test_a_host_needs_continuous_bridges_and_a_step_name_no_bridge_has(tmp_path):
    hosted = SINK + "        mode: continuous\n        continuous: {host: fleet}\n"
    [bridge] = load_bridges(write(tmp_path, hosted))
    assert bridge.continuous.host == "fleet"
    with pytest.raises(BridgeConfigError) as batch:
        load_bridges(write(tmp_path, SINK + "        mode: batch\n        continuous: {host: fleet}\n"))
    assert "continuous.host 'fleet' needs mode: continuous" in str(batch.value)
    clash = hosted.replace("name: orders", "name: host_fleet")
    with pytest.raises(BridgeConfigError) as named:
        load_bridges(write(tmp_path, clash))
    assert "would name its run's step host_fleet" in str(named.value)
    with pytest.raises(BridgeConfigError) as bad:
        load_bridges(write(tmp_path, hosted.replace("host: fleet", "host: 'a b'")))
    assert "continuous.host" in str(bad.value)


def test_a_bridge_is_always_on_in_the_default_host_unless_it_says_otherwise(tmp_path):
    [bridge] = load_bridges(write(tmp_path, SINK))
    assert (bridge.mode, bridge.continuous.host) == ("continuous", "default")
    [alone] = load_bridges(write(tmp_path, SINK + "        continuous: {host: null}\n"))
    assert (alone.mode, alone.continuous.host) == ("continuous", None)
    [batch] = load_bridges(write(tmp_path, SINK + "        mode: batch\n"))
    assert (batch.mode, batch.continuous.host) == ("batch", None)
    with pytest.raises(BridgeConfigError) as named:  # a bridge named as the default host's step
        load_bridges(write(tmp_path, SINK.replace("name: orders", "name: host_default")))
    assert ("continuous.host 'default' (the host of always-on bridges that name none) would name its run's step "
            "host_default, which is a bridge's name; rename that bridge" in str(named.value))


def _continuous_from_properties(tmp_path, tasks_max: str, continuous: str = "{host: null}"):
    write(tmp_path, f"""\
        name=cps
        connector.class=com.google.pubsub.kafka.sink.CloudPubSubSinkConnector
        tasks.max={tasks_max}
        topics=t
        cps.topic=t
        cps.project=p
    """, name="cps.properties")
    return load_bridges(write(tmp_path, f"""
        bridges:
          - name: cps
            properties: cps.properties
            mode: continuous
            continuous: {continuous}
    """))


def test_tasks_max_is_the_streams_task_count_unless_set_or_hosted(tmp_path):
    [bridge] = _continuous_from_properties(tmp_path, "3")
    assert bridge.continuous.stream_tasks == 3 and bridge.continuous.host is None
    [bridge] = _continuous_from_properties(tmp_path, "3", "{}")  # in the default host
    assert bridge.continuous.stream_tasks == 1 and bridge.continuous.host == "default"
    [bridge] = _continuous_from_properties(tmp_path, "3", "{stream_tasks: 2}")
    assert bridge.continuous.stream_tasks == 2
    [bridge] = _continuous_from_properties(tmp_path, "3", "{host: fleet}")
    assert bridge.continuous.stream_tasks == 1 and bridge.continuous.host == "fleet"
    [bridge] = _continuous_from_properties(tmp_path, "500")
    assert bridge.continuous.stream_tasks == 64
    [bridge] = load_bridges(write(tmp_path, SINK))
    assert bridge.continuous.stream_tasks == 1


@pytest.mark.parametrize("tasks_max", ["0", "two", "1.5"])
def test_a_tasks_max_that_is_not_a_count_is_named(tmp_path, tasks_max):
    with pytest.raises(BridgeConfigError) as err:
        _continuous_from_properties(tmp_path, tasks_max)
    assert f"bridge 'cps': key 'tasks.max': must be a whole number of at least 1 (got '{tasks_max}')" in str(err.value)


def test_the_archives_rotation_is_unset_or_at_least_100_ms(tmp_path):
    archive = """bridges:
  - name: archive
    connector: S3BlockGzipSinkConnector
    config:
      topics: t
      s3.bucket: b-archive
"""
    assert load_bridges(write(tmp_path, archive))[0].config.rotate_schedule_interval_ms == -1
    assert load_bridges(write(tmp_path, archive + "      rotate.schedule.interval.ms: 60000\n"))[
        0].config.rotate_schedule_interval_ms == 60000
    with pytest.raises(BridgeConfigError, match="(?s)key 'rotate.schedule.interval.ms'.*at least 100 ms"):
        load_bridges(write(tmp_path, archive + "      rotate.schedule.interval.ms: 0\n"))
