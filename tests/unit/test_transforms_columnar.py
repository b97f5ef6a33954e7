"""The column-wise chain (Filter, InsertHeader, DropHeaders, RegexRouter, TimestampRouter and the three predicates on
a whole Arrow batch) gives the Cloud Pub/Sub sink's record-by-record chain's messages, row for row; a chain with any other
transform takes the record path."""

import pyarrow.compute as pc
import pytest

from connectors.cloud_pubsub_sink.columnar import ENCODE_FROM_ROWS, ColumnarConverter
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import CloudPubSubSinkConverter
from connectors.errors import RecordError
from connectors.kafka.record import records_from_arrow
from tests.unit.kafka_rows import awkward_kafka_rows

T = "org.apache.kafka.connect.transforms."
CHAINS = {
    "tombstones out, a header in": {
        "transforms": "tag,drop", "transforms.tag.type": T + "InsertHeader", "transforms.tag.header": "source",
        "transforms.tag.value.literal": "kafka", "transforms.drop.type": T + "Filter",
        "transforms.drop.predicate": "tomb", "predicates": "tomb",
        "predicates.tomb.type": T + "predicates.RecordIsTombstone"},
    "headers dropped unless one is there, the topic renamed": {
        "transforms": "route,clean", "transforms.route.type": T + "RegexRouter", "transforms.route.regex": "t(.*)",
        "transforms.route.replacement": "renamed$1", "transforms.clean.type": T + "DropHeaders",
        "transforms.clean.headers": "bin,n,key", "transforms.clean.predicate": "has",
        "transforms.clean.negate": "true", "predicates": "has", "predicates.has.type": T + "predicates.HasHeaderKey",
        "predicates.has.name": "goog-bad"},
    "tombstones out, the rest routed by the hour (records without a timestamp fail)": {
        "transforms": "drop,hourly", "transforms.drop.type": T + "Filter", "transforms.drop.predicate": "tomb",
        "predicates": "tomb", "predicates.tomb.type": T + "predicates.RecordIsTombstone",
        "transforms.hourly.type": T + "TimestampRouter", "transforms.hourly.topic.format": "${topic}_${timestamp}",
        "transforms.hourly.timestamp.format": "yyyyMMddHH"},
    "records of one topic kept": {
        "transforms": "only", "transforms.only.type": T + "Filter", "transforms.only.predicate": "other",
        "transforms.only.negate": "true", "predicates": "other",
        "predicates.other.type": T + "predicates.TopicNameMatches", "predicates.other.pattern": "t"},
}


def _outcome(outcome):
    if isinstance(outcome, RecordError):
        return ("error", str(outcome))
    return None if outcome is None else (outcome.data, outcome.attributes, outcome.ordering_key,
                                         outcome.headers_dropped, outcome.topic)


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("extra", [{}, {"metadata.publish": True, "headers.publish": True}])
def test_the_columnar_chain_gives_the_record_chains_messages(chain, extra):
    config = CloudPubSubSinkConfig.model_validate({
        "topics": "t", "cps.project": "p", "cps.topic": "c-${topic}", **CHAINS[chain], **extra,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter"})
    columnar = ColumnarConverter(config)
    assert columnar.chain is not None
    batch = awkward_kafka_rows()
    expected = []
    for record in records_from_arrow(batch):
        try:
            expected.append(_outcome(CloudPubSubSinkConverter(config).convert(record)))
        except RecordError as exc:
            expected.append(_outcome(exc))
    got = [_outcome(outcome) for _, outcome in columnar.convert(batch)]
    assert got == expected
    assert any(isinstance(o, tuple) and o[0] != "error" for o in got)


def test_the_encoded_batch_path_runs_a_chain_that_drops_nothing():
    config = CloudPubSubSinkConfig.model_validate({
        "topics": "t", "cps.project": "p", "cps.topic": "c", **CHAINS["tombstones out, a header in"]})
    columnar = ColumnarConverter(config)
    batch = awkward_kafka_rows()
    assert columnar.encoded(batch) is None  # its tombstones are dropped: the rows go one by one
    plain = batch.filter(pc.and_(pc.equal(batch.column("key"), b"user-1"), pc.equal(batch.column("value"), b"hello")))
    assert plain.num_rows > 0
    plain = plain.take([0] * ENCODE_FROM_ROWS)  # long enough to be encoded at once
    encoded = columnar.encoded(plain)
    assert encoded is not None


def test_a_chain_that_reads_fields_takes_the_record_path():
    config = CloudPubSubSinkConfig.model_validate({
        "topics": "t", "cps.project": "p", "cps.topic": "c", "transforms": "k",
        "transforms.k.type": T + "HoistField$Value", "transforms.k.field": "f"})
    assert ColumnarConverter(config).chain is None and not ColumnarConverter(config).columnar


@pytest.mark.parametrize("chain, reads", [(CHAINS["tombstones out, a header in"], False),
                                          (CHAINS["headers dropped unless one is there, the topic renamed"], True)])
def test_headers_are_read_when_a_predicate_looks_at_them(chain, reads):
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c", **chain})
    assert config.reads_kafka_headers is reads


def _lite_config(**keys):
    from connectors.pubsublite_sink.config import PubSubLiteSinkConfig

    return PubSubLiteSinkConfig.model_validate({"topics": "t", "pubsublite.project": "p",
                                                "pubsublite.location": "us-central1-a", "pubsublite.topic": "lt",
                                                **keys})


@pytest.mark.parametrize("chain", list(CHAINS))
def test_the_lite_sinks_columnar_chain_gives_its_record_chains_messages(chain):
    from connectors.pubsublite_sink.columnar import LiteColumnarConverter
    from connectors.pubsublite_sink.convert import PubSubLiteSinkConverter

    config = _lite_config(**CHAINS[chain], **{"key.converter": "org.apache.kafka.connect.storage.StringConverter"})
    columnar = LiteColumnarConverter(config)
    assert columnar.chain is not None
    batch = awkward_kafka_rows()

    def shown(outcome):
        if isinstance(outcome, RecordError):
            return ("error", str(outcome))
        return None if outcome is None else outcome.SerializeToString(deterministic=True)

    expected = []
    for record in records_from_arrow(batch):
        try:
            expected.append(shown(PubSubLiteSinkConverter(config).convert(record)))
        except RecordError as exc:
            expected.append(shown(exc))
    got = [shown(outcome if outcome is None or isinstance(outcome, RecordError) else outcome[0])
           for _, outcome in columnar.convert(batch)]
    assert got == expected
    assert any(isinstance(o, bytes) for o in got)


def test_the_lite_sink_routes_by_the_topic_a_router_gave_when_its_topic_follows_the_kafka_topic():
    routed = _lite_config(**{"pubsublite.topic": "lite-${topic}"},
                          **CHAINS["headers dropped unless one is there, the topic renamed"])
    assert routed.routed_by_transforms()
    assert not _lite_config(**CHAINS["headers dropped unless one is there, the topic renamed"]).routed_by_transforms()
    assert not _lite_config(**{"pubsublite.topic": "lite-${topic}"}).routed_by_transforms()
    # The message names the renamed topic (what the writer routes by), on both conversion paths.
    from connectors.pubsublite_sink.columnar import LiteColumnarConverter
    from connectors.pubsublite_sink.convert import KAFKA_TOPIC_ATTRIBUTE

    for converter in ({}, {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                           "value.converter.schemas.enable": "false"}):
        config = _lite_config(**{"pubsublite.topic": "lite-${topic}"}, **converter,
                              **CHAINS["headers dropped unless one is there, the topic renamed"])
        messages = [outcome[0] for _, outcome in LiteColumnarConverter(config).convert(awkward_kafka_rows())
                    if isinstance(outcome, tuple)]
        assert messages and {m.attributes[KAFKA_TOPIC_ATTRIBUTE].values[0] for m in messages} == {b"renamed"}
    assert str(routed.topic_path("renamed")).endswith("/topics/lite-renamed")

@pytest.mark.parametrize("pattern", ["yyyyMMdd", "yyyyMMddHHmm", "yyyy-MM-dd'T'HH:mm:ss.SSS", "EEE d MMM ''yy hh a",
                                     "D", "ss"])
def test_a_timestamp_router_names_each_rows_topic_as_the_record_chain_does(pattern):
    """Column-wise, a TimestampRouter writes a name once per topic and span of its pattern: the same names as record by
    record, across days, years, the epoch and before it."""
    import numpy as np
    import pyarrow as pa

    from connectors.transforms.chain import load_chain
    from connectors.transforms.columnar import ColumnarChain
    from connectors.transforms.record import ConnectRecord

    chain = load_chain({"transforms": "route", "transforms.route.type": T + "TimestampRouter",
                        "transforms.route.topic.format": "${timestamp}.${topic}",
                        "transforms.route.timestamp.format": pattern})
    rng = np.random.default_rng(7)
    stamps = [int(t) for t in rng.integers(-2_000_000_000_000, 4_000_000_000_000, 400)]
    stamps += [0, -1, 1, 86_399_999, 86_400_000, -86_400_000, -86_400_001, 1_700_000_000_000]
    stamps += [1_700_000_000_000 + i * 997 for i in range(200)]  # many in one day, hour, minute
    stamps += [253_402_300_800_000, 2 ** 62]  # past the year 9999: the record path fails them, and so must this
    n = len(stamps)
    batch = pa.RecordBatch.from_pydict({
        "topic": [("orders", "payments")[i % 2] for i in range(n)], "partition": [0] * n, "offset": list(range(n)),
        "key": [None] * n, "value": [b"v"] * n, "timestamp_ms": stamps, "timestampType": [0] * n,
        "headers": [[]] * n}, schema=awkward_kafka_rows().schema)
    transformed = ColumnarChain.of(chain).apply(batch)
    record_chain = chain.running()
    expected = []
    for topic, timestamp in zip(batch.column("topic").to_pylist(), stamps):
        try:
            expected.append(record_chain.apply(ConnectRecord(topic, 0, None, None, None, b"v", timestamp)).topic)
        except RecordError as exc:
            expected.append(("error", str(exc)))
    got = [("error", str(transformed.failed[row])) if row in transformed.failed else topic
           for row, topic in enumerate(transformed.batch.column("topic").to_pylist())]
    assert got == expected
    assert transformed.topics_changed and len(transformed.failed) == 2 and transformed.dropped is None
