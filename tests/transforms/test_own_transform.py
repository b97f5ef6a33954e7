"""A transform from outside this repository: the example package in examples/uppercase_transform, installed with pip
into a folder of its own, is found through its entry point, its keys checked at load, and it runs in a chain beside
Kafka's own transforms."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from local_stack.paths import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "uppercase_transform"
PROGRAM = """
import json, sys
from connectors.transforms.chain import load_chain
from connectors.transforms.record import ConnectRecord
keys = json.loads(sys.argv[1])
try:
    chain = load_chain(keys).running()
except ValueError as exc:
    print(json.dumps({"refused": str(exc)}))
    sys.exit(0)
out = chain.apply(ConnectRecord("orders", 0, None, None, None, {"name": "ada", "city": "oslo"}, 1000))
print(json.dumps({"topic": out.topic, "value": out.value}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("transform")
    source, target = work / "source", work / "site"
    shutil.copytree(EXAMPLE, source)  # the build leaves files beside the sources
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
                   check=True, capture_output=True)
    return target


def _run(site, keys: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(PROJECT_ROOT)])}
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(keys)], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def test_an_installed_transform_runs_in_a_chain_beside_kafkas(site):
    result = _run(site, {"transforms": "up,route", "transforms.up.type": "com.example.connect.Uppercase$Value",
                         "transforms.up.field": "name", "transforms.route.type": "RegexRouter",
                         "transforms.route.regex": "orders", "transforms.route.replacement": "people"})
    assert result == {"topic": "people", "value": {"name": "ADA", "city": "oslo"}}


def test_its_keys_are_checked_at_load_like_kafkas(site):
    result = _run(site, {"transforms": "up", "transforms.up.type": "Uppercase$Value", "transforms.up.feild": "x"})
    assert "key 'transforms.up.feild': unknown key (did you mean 'transforms.up.field'?" in result["refused"]
