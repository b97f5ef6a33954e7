"""The columnar conversion gives what the record-by-record rules give, row for row."""

import pytest

from connectors.cloud_pubsub_sink.columnar import ENCODE_FROM_ROWS, ColumnarConverter
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_sink.convert import CloudPubSubSinkConverter
from connectors.errors import RecordError
from connectors.kafka.record import records_from_arrow
from tests.unit.kafka_rows import awkward_kafka_rows

STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def _outcome(convert, record):
    try:
        message = convert(record)
    except RecordError as exc:
        return ("error", str(exc))
    return None if message is None else (message.data, message.attributes, message.ordering_key,
                                         message.headers_dropped)


@pytest.mark.parametrize("key_converter, value_converter", [(STRING, STRING), (BYTES, BYTES), (BYTES, STRING)])
@pytest.mark.parametrize("extra", [
    {}, {"metadata.publish": True}, {"headers.publish": True, "orderingKeySource": "key"},
    {"metadata.publish": True, "headers.publish": True, "orderingKeySource": "partition"},
])
def test_columnar_conversion_matches_the_record_rules(key_converter, value_converter, extra):
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c",
                                                   "key.converter": key_converter,
                                                   "value.converter": value_converter, **extra})
    columnar = ColumnarConverter(config)
    assert columnar.kinds.columnar
    batch = awkward_kafka_rows()
    expected = [_outcome(CloudPubSubSinkConverter(config).convert, r) for r in records_from_arrow(batch)]
    got = []
    for row, outcome in columnar.convert(batch):
        assert row == len(got)
        got.append(("error", str(outcome)) if isinstance(outcome, RecordError) else
                   None if outcome is None else (outcome.data, outcome.attributes, outcome.ordering_key,
                                                 outcome.headers_dropped))
    assert got == expected
    kinds = {type(o[0]) if o else None for o in expected}
    # the data set has messages, bad records and (without metadata attributes) skipped records
    assert kinds == ({bytes, str} if extra.get("metadata.publish") else {bytes, str, None})


def test_other_converters_take_the_record_path():
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c",
                                                   "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                                   "value.converter.schemas.enable": False})
    columnar = ColumnarConverter(config)
    assert not columnar.kinds.columnar
    outcomes = [type(o).__name__ for _, o in columnar.convert(awkward_kafka_rows().slice(0, 12))]
    # rows 0-3 have a null value; 4-7 an empty one and 8-11 b"hello": neither is JSON
    assert outcomes == ["NoneType"] * 4 + ["RecordError"] * 8


@pytest.mark.parametrize("extra, reads", [
    ({}, False), ({"metadata.publish": True}, False), ({"headers.publish": True}, True),
    ({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}, True),
])
def test_headers_are_read_only_when_delivery_uses_them(extra, reads):
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c", **extra})
    assert config.reads_kafka_headers is reads


@pytest.mark.parametrize("value_converter", [STRING, "org.apache.kafka.connect.json.JsonConverter"])
def test_rows_without_a_headers_column_give_the_same_messages(value_converter):
    """What Spark's reader gives a sink that does not read headers: the same messages, row for row."""
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c",
                                                   "metadata.publish": True, "value.converter": value_converter,
                                                   "value.converter.schemas.enable": False})
    assert not config.reads_kafka_headers
    batch = awkward_kafka_rows()
    without = batch.drop_columns(["headers"])

    def outcomes(rows):
        return [(row, str(outcome) if isinstance(outcome, RecordError) else
                 None if outcome is None else (outcome.data, outcome.attributes))
                for row, outcome in ColumnarConverter(config).convert(rows)]

    assert outcomes(without) == outcomes(batch)
    assert [r.headers for r in records_from_arrow(without)] == [[]] * batch.num_rows


@pytest.mark.parametrize("key_converter, value_converter", [(STRING, STRING), (BYTES, BYTES), (BYTES, STRING)])
def test_a_batch_encoded_at_once_decodes_to_the_record_rules_messages(key_converter, value_converter):
    from google.pubsub_v1.types import PublishRequest

    from connectors.cloud_pubsub.wire import field_bytes

    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c",
                                                   "key.converter": key_converter, "value.converter": value_converter})
    columnar = ColumnarConverter(config)
    batch = awkward_kafka_rows()
    rows = [i for i, (_, outcome) in enumerate(columnar.convert(batch))
            if outcome is not None and not isinstance(outcome, RecordError) and not outcome.attributes.keys() - {"key"}]
    # Only rows that become messages with at most the key attribute, repeated to a batch long enough to encode.
    rows = rows * (ENCODE_FROM_ROWS // len(rows) + 1)
    whole = batch.take(rows)
    assert columnar.encoded(whole.slice(0, ENCODE_FROM_ROWS - 1)) is None  # shorter: row by row is cheaper
    encoded = columnar.encoded(whole)
    assert encoded is not None and len(encoded) == len(rows) >= ENCODE_FROM_ROWS
    decoded = PublishRequest.pb().FromString(field_bytes(1, b"c") + bytes(encoded.chunk(0, len(rows)))).messages
    expected = [CloudPubSubSinkConverter(config).convert(r) for r in records_from_arrow(whole)]
    assert [(m.data, dict(m.attributes)) for m in decoded] == [(m.data, m.attributes) for m in expected]
    assert list(encoded.sizes) == [m.size() for m in expected]
    # Any row the rules must look at alone (bad UTF-8, an over-long key, nothing to publish) sends the batch there.
    assert columnar.encoded(batch) is None


def test_no_batch_encoding_with_more_than_the_key_as_attributes():
    for extra in ({"metadata.publish": True}, {"headers.publish": True}, {"orderingKeySource": "key"},
                  {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}):
        config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "p", "cps.topic": "c", **extra})
        assert not ColumnarConverter(config).encodes_batches
