"""Each transform and predicate against Apache Kafka's own classes (connect-transforms 4.1.1, run by a small Java
harness): the same records through the same chain give the same records, or the same fate (dropped, or an error
that errors.tolerance decides on)."""

from __future__ import annotations

import json

import pytest

from local_stack.fetch import kafka_transforms_jars
from tests.transforms.cases import CASES
from tests.transforms.differential import kafka_results, our_results, same


@pytest.fixture(scope="module")
def kafka() -> dict[str, list[dict]]:
    names = list(CASES)
    results = kafka_results([{"config": CASES[n][0], "records": CASES[n][1]} for n in names], kafka_transforms_jars())
    return dict(zip(names, results))


@pytest.mark.parametrize("name", list(CASES))
def test_our_transform_gives_what_kafkas_gives(kafka, name):
    config, records = CASES[name]
    ours, theirs = our_results({"config": config, "records": records}), kafka[name]
    assert len(ours) == len(theirs)
    differences = [f"record {i}:\n  ours:  {json.dumps(o, sort_keys=True)}\n  kafka: {json.dumps(k, sort_keys=True)}"
                   for i, (o, k) in enumerate(zip(ours, theirs)) if not same(o, k)]
    assert not differences, "\n".join(differences)
