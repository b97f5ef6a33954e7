"""The shared task body of the sinks without converters (Kafka, Kinesis, Pulsar) runs the bridge's column-wise transforms
before their writer: what a Filter drops is counted read and skipped, the rest reaches the writer with the headers
the chain gave it and its own Kafka topic (the counts and positions are the source partition's), and the topic a
router gave it beside."""

import pyarrow as pa

from connectors.config.common import ErrorHandlingKeys
from connectors.framework.sink_tally import TalliedBatch
from connectors.framework.sink_writer import SinkWriter, TallySettings, target_topics, write_records
from connectors.pulsar_sink.config import PulsarSinkConfig
from connectors.transforms.columnar import ColumnarChain
from tests.unit.kafka_rows import awkward_kafka_rows

T = "org.apache.kafka.connect.transforms."


class _Writer(SinkWriter):
    """Takes every record put, publishes it at once."""

    def __init__(self, tally):
        super().__init__(tally)
        self.put_batches: list[pa.RecordBatch] = []

    def put(self, records: pa.RecordBatch) -> None:
        slot = TalliedBatch(records, self.tally)
        for row in range(records.num_rows):
            slot.counts(row).published += 1
        self.put_batches.append(records)

    def flush(self) -> None:
        pass


def _chain(**keys) -> ColumnarChain:
    config = PulsarSinkConfig.model_validate({"topics": "t", "pulsar.service.url": "pulsar://x:6650",
                                              "pulsar.topic": "persistent://public/default/fixed", **keys})
    return ColumnarChain.of(config.transforms)


def test_dropped_records_are_counted_and_the_rest_keep_their_topic_with_the_chains_headers():
    chain = _chain(**{
        "transforms": "drop,tag,route", "transforms.drop.type": T + "Filter", "transforms.drop.predicate": "tomb",
        "predicates": "tomb", "predicates.tomb.type": T + "predicates.RecordIsTombstone",
        "transforms.tag.type": T + "InsertHeader", "transforms.tag.header": "source",
        "transforms.tag.value.literal": "kafka",
        "transforms.route.type": T + "RegexRouter", "transforms.route.regex": "t", "transforms.route.replacement": "u"})
    batch = awkward_kafka_rows()
    writers = []

    def open_writer(tally):
        writers.append(_Writer(tally))
        return writers[-1]

    [summary] = write_records(TallySettings("b", ErrorHandlingKeys.model_validate({}), {}, chain), open_writer,
                              iter([batch]))
    put = pa.Table.from_batches(writers[0].put_batches)
    tombstones = batch.column("value").null_count
    assert put.num_rows == batch.num_rows - tombstones and put.column("value").null_count == 0
    assert set(put.column("topic").to_pylist()) == {"t"}  # the router's name does not reach a fixed target
    assert all(h[-1] == {"key": "source", "value": b"kafka"} for h in put.column("headers").to_pylist())
    rows = summary
    assert sum(r["records"] for r in rows) == batch.num_rows
    assert sum(r["skipped"] for r in rows) == tombstones
    assert sum(r["published"] for r in rows) == batch.num_rows - tombstones
    assert {(r["topic"], r["partition"]) for r in rows} == {("t", 0), ("t", 1), ("t", 2)}
    # The router's topic is what a sink routed by ${topic} sends each record by; the record's own stays in `topic`.
    assert all(target_topics(b) == ["u"] * b.num_rows for b in writers[0].put_batches)
    assert set(put.column("topic").to_pylist()) == {"t"}


def test_without_a_router_the_target_topic_is_the_records_own():
    chain = _chain(**{"transforms": "tag", "transforms.tag.type": T + "InsertHeader",
                      "transforms.tag.header": "source", "transforms.tag.value.literal": "kafka"})
    writers = []

    def open_writer(tally):
        writers.append(_Writer(tally))
        return writers[-1]

    batch = awkward_kafka_rows()
    list(write_records(TallySettings("b", ErrorHandlingKeys.model_validate({}), {}, chain), open_writer,
                       iter([batch])))
    assert [target_topics(b) for b in writers[0].put_batches] == [batch.column("topic").to_pylist()]


def test_a_batch_the_chain_drops_whole_never_reaches_the_writer():
    chain = _chain(**{"transforms": "all", "transforms.all.type": T + "Filter"})
    writers = []

    def open_writer(tally):
        writers.append(_Writer(tally))
        return writers[-1]

    batch = awkward_kafka_rows()
    [summary] = write_records(TallySettings("b", ErrorHandlingKeys.model_validate({}), {}, chain), open_writer,
                              iter([batch]))
    assert writers[0].put_batches == []
    assert sum(r["skipped"] for r in summary) == batch.num_rows


def test_records_a_timestamp_router_cannot_route_go_through_errors_tolerance():
    """A TimestampRouter applied to a record without a timestamp fails it (Kafka's DataException): counted read and
    dropped under errors.tolerance=all, the task failed naming the record under none; the rest are routed by hour."""
    import pytest

    from connectors.errors import RecordError

    chain = _chain(**{"transforms": "drop,hourly", "transforms.drop.type": T + "Filter",
                      "transforms.drop.predicate": "tomb", "predicates": "tomb",
                      "predicates.tomb.type": T + "predicates.RecordIsTombstone",
                      "transforms.hourly.type": T + "TimestampRouter",
                      "transforms.hourly.timestamp.format": "yyyyMMddHH"})
    batch = awkward_kafka_rows()
    timestamps, types = batch.column("timestamp_ms").to_pylist(), batch.column("timestampType").to_pylist()
    tombstone = [v is None for v in batch.column("value").to_pylist()]
    untimed = [not t and (ts is None or kind < 0) for t, ts, kind in zip(tombstone, timestamps, types)]
    writers = []

    def open_writer(tally):
        writers.append(_Writer(tally))
        return writers[-1]

    tolerant = ErrorHandlingKeys.model_validate({"errors.tolerance": "all"})
    [summary] = write_records(TallySettings("b", tolerant, {}, chain), open_writer, iter([batch]))
    rows = summary
    assert sum(r["records"] for r in rows) == batch.num_rows
    assert sum(r["skipped"] for r in rows) == sum(tombstone)
    assert sum(r["failed_dropped"] for r in rows) == sum(untimed) > 0
    put = pa.Table.from_batches(writers[0].put_batches)
    assert put.num_rows == batch.num_rows - sum(tombstone) - sum(untimed)
    assert {t for b in writers[0].put_batches for t in target_topics(b)} == {"t-2023111422"}

    first = next(row for row, u in enumerate(untimed) if u)
    with pytest.raises(RecordError, match=rf"topic t partition {first % 3} offset {100 + first}: transform 'hourly' "
                                          r"\(TimestampRouter\): the record has no timestamp"):
        list(write_records(TallySettings("b", ErrorHandlingKeys.model_validate({}), {}, chain), open_writer,
                           iter([batch])))


def test_the_sinks_without_converters_refuse_what_they_cannot_run_in_one_line():
    import pytest

    from connectors.kinesis_sink.config import KinesisSinkConfig

    kinesis = {"topics": "t", "kinesis.stream.name": "s"}
    with pytest.raises(ValueError, match=r"transform 'c' \(Cast\$Value\): this connector runs only Filter"):
        KinesisSinkConfig.model_validate({**kinesis, "transforms": "c", "transforms.c.type": T + "Cast$Value",
                                          "transforms.c.spec": "int32"})
    router = {"transforms": "r", "transforms.r.type": T + "RegexRouter", "transforms.r.regex": "(.*)",
              "transforms.r.replacement": "x-$1"}
    routed = KinesisSinkConfig.model_validate({**kinesis, "kinesis.stream.name": "k-${topic}", **router})
    assert routed.routed_by_transforms() and routed.topics_after_transforms(["t", "u"]) == ["x-t", "x-u"]
    assert not KinesisSinkConfig.model_validate({**kinesis, **router}).routed_by_transforms()


def test_the_kafka_sink_takes_a_router_only_where_its_target_topic_is_fixed():
    import pytest

    from connectors.kafka_sink.config import KafkaSinkConfig

    kafka = {"topics": "t", "target.bootstrap.servers": "b:9092"}
    router = {"transforms": "r", "transforms.r.type": T + "RegexRouter", "transforms.r.regex": "(.*)",
              "transforms.r.replacement": "x-$1"}
    with pytest.raises(ValueError, match=r"transform 'r' \(RegexRouter\) renames topics, which is not supported with "
                                         r"\$\{topic\} in topic.rename.format: rename topics with topic.rename.format"):
        KafkaSinkConfig.model_validate({**kafka, **router})  # its default is ${topic}
    daily = {"transforms": "d", "transforms.d.type": T + "TimestampRouter"}
    with pytest.raises(ValueError, match=r"transform 'd' \(TimestampRouter\) renames topics"):
        KafkaSinkConfig.model_validate({**kafka, **daily})
    assert KafkaSinkConfig.model_validate({**kafka, "topic.rename.format": "copy", **router}).transforms
    with pytest.raises(ValueError, match=r"transform 'm' \(MaskField\$Value\): this connector runs only Filter"):
        KafkaSinkConfig.model_validate({**kafka, "transforms": "m", "transforms.m.type": T + "MaskField$Value",
                                        "transforms.m.fields": "card"})


def test_in_a_bridges_file_the_refusal_is_one_line_naming_the_bridge_and_the_transform(tmp_path):
    import textwrap

    import pytest

    from connectors.bridges_file import BridgeConfigError, load_bridges

    (tmp_path / "bridges.yaml").write_text(textwrap.dedent("""\
        bridges:
          - name: to_pulsar
            connector: PulsarSinkConnector
            config: {topics: a, pulsar.service.url: "pulsar://x:6650", transforms: k,
                     transforms.k.type: ValueToKey, transforms.k.fields: id}
        """))
    with pytest.raises(BridgeConfigError) as refused:
        load_bridges(tmp_path / "bridges.yaml")
    [problem] = str(refused.value).splitlines()[1:]  # under the file's name, a line per problem
    assert problem.startswith("  bridge 'to_pulsar': transform 'k' (ValueToKey): this connector runs only Filter")
