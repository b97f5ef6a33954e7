import json
import os
import subprocess
import sys
import urllib.request

import boto3
import pytest

pytestmark = pytest.mark.e2e


def test_every_server_runs_and_answers(stack):
    # The cluster's services are listed too once a test has started them (`up --cluster`).
    assert [(s.name, s.running) for s in stack.status()][:8] == [
        ("kafka", True), ("kafka_target", True), ("pubsub", True), ("pubsublite", True), ("s3", True),
        ("pulsar", True), ("schema_registry", True), ("spark", True)]
    with urllib.request.urlopen(os.environ["SCHEMA_REGISTRY_URL"] + "/subjects", timeout=5) as response:
        assert isinstance(json.loads(response.read()), list)  # Confluent's API: a JSON list of subjects
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket="stack-check")
    assert "stack-check" in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_up_is_idempotent_and_env_prints_exports(stack):
    pids = [s.pid for s in stack.status()]
    stack.up(log=lambda line: None)
    assert [s.pid for s in stack.status()] == pids
    env = {**os.environ, "BRIDGE_STACK_HOME": str(stack.home)}
    out = subprocess.run([sys.executable, "-m", "bridgectl.cli", "local", "env"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert f"export KAFKA_BOOTSTRAP_SERVERS={os.environ['KAFKA_BOOTSTRAP_SERVERS']}" in out.splitlines()
    assert f"export PUBSUB_EMULATOR_HOST={os.environ['PUBSUB_EMULATOR_HOST']}" in out.splitlines()
    assert any(line.startswith("export DAGSTER_HOME=") for line in out.splitlines())
    assert f"export PUBSUBLITE_API_ENDPOINT={os.environ['PUBSUBLITE_API_ENDPOINT']}" in out.splitlines()
    assert f"export SCHEMA_REGISTRY_URL={os.environ['SCHEMA_REGISTRY_URL']}" in out.splitlines()
    assert f"export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={stack.lite_certificate()}" in out.splitlines()


def test_the_registry_keeps_its_schemas_through_a_restart(stack):
    """Kafka keeps records that name schema ids across `down`/`up`; the registry keeps the ids they name."""
    url = os.environ["SCHEMA_REGISTRY_URL"]
    subject = f"restart-check-{os.getpid()}-value"
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions", method="POST",
        data=json.dumps({"schema": json.dumps({"type": "record", "name": "R", "fields": [
            {"name": "id", "type": "long"}]})}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        schema_id = json.loads(response.read())["id"]
    stack.down(only=("schema_registry",), log=lambda line: None)
    stack.up(only=("schema_registry",), log=lambda line: None)
    with urllib.request.urlopen(f"{url}/schemas/ids/{schema_id}", timeout=10) as response:
        assert json.loads(json.loads(response.read())["schema"])["name"] == "R"
