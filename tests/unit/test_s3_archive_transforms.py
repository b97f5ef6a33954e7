"""The S3 archive's transforms: the column-wise ones with any predicate; a router is refused in one line, since its
files, indexes and cursors are per Kafka topic partition."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig

BASE = {"topics": "t", "s3.bucket": "bkt"}


def test_a_filter_with_a_predicate_is_taken_and_the_headers_are_read_for_it():
    config = S3BlockGzipSinkConfig.model_validate({
        **BASE, "transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "p",
        "predicates": "p", "predicates.p.type": "HasHeaderKey", "predicates.p.name": "internal"})
    assert [stage.alias for stage in config.transforms.stages] == ["f"] and config.reads_kafka_headers
    assert not S3BlockGzipSinkConfig.model_validate(BASE).reads_kafka_headers


def test_a_router_is_refused_in_one_line_naming_it():
    with pytest.raises(ValidationError) as refused:
        S3BlockGzipSinkConfig.model_validate({**BASE, "transforms": "r", "transforms.r.type": "RegexRouter",
                                              "transforms.r.regex": "(.*)", "transforms.r.replacement": "x-$1"})
    assert "transform 'r' (RegexRouter) renames topics, which the archive does not support" in str(refused.value)


def test_a_field_transform_is_refused_in_one_line_naming_it():
    with pytest.raises(ValidationError) as refused:
        S3BlockGzipSinkConfig.model_validate({**BASE, "transforms": "c", "transforms.c.type": "Cast$Value",
                                              "transforms.c.spec": "int64"})
    assert ("transform 'c' (Cast$Value): this connector runs only Filter, InsertHeader and DropHeaders, with any "
            "predicate") in str(refused.value)
