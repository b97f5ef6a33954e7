"""A connector plugin from outside this repository: the example package in examples/file_stream_sink_plugin,
installed with pip into a folder of its own, is found through its entry point and moves data under the
documented command line, resuming from the offsets it recorded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from local_stack.paths import PROJECT_ROOT
from tests.e2e.helpers import cli_run, kafka_admin, produce

pytestmark = pytest.mark.e2e

EXAMPLE = PROJECT_ROOT / "examples" / "file_stream_sink_plugin"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example installed with pip (without dependencies: the host is this venv) into its own folder."""
    work = tmp_path_factory.mktemp("plugin")
    source, site = work / "source", work / "site"
    shutil.copytree(EXAMPLE, source)  # the build leaves files beside the sources
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(site), str(source)], check=True, capture_output=True)
    return site


def with_plugin(env: dict[str, str], site: Path) -> dict[str, str]:
    return {**env, "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")])}


def test_an_installed_plugin_is_listed_beside_the_five(plugin_site):
    listed = subprocess.run(
        [sys.executable, "-c", "from connectors.plugins import installed_plugins; print(sorted(installed_plugins()))"],
        env=with_plugin(dict(os.environ), plugin_site), check=True, capture_output=True, text=True).stdout
    assert "'FileStreamSinkConnector'" in listed and "'CloudPubSubSinkConnector'" in listed


def test_a_bridge_of_the_plugin_moves_records_and_resumes(stack, spark_remote, plugin_site, tmp_path, unique):
    topic, name, out = f"filesink-{unique}", f"filesink_{unique}", tmp_path / "out.txt"
    kafka_admin().create_topic(topic, partitions=2)
    produce(topic, [(f"k{i}", f"line {i}") for i in range(30)])
    bridges = tmp_path / "bridges.yaml"
    # An unchanged Kafka Connect .properties file of the example connector.
    (tmp_path / "file-sink.properties").write_text(textwrap.dedent(f"""\
        name={name}
        connector.class=org.apache.kafka.connect.file.FileStreamSinkConnector
        tasks.max=1
        topics={topic}
        file={out}
        """))
    bridges.write_text("bridges:\n  - properties: file-sink.properties\n    mode: batch\n")
    command, env = cli_run(tmp_path, str(bridges), name, {"BRIDGE_SPARK_REMOTE": spark_remote})
    env = with_plugin(env, plugin_site)

    subprocess.run(command, env=env, check=True, capture_output=True)
    assert sorted(out.read_text().splitlines()) == sorted(f"line {i}" for i in range(30))

    produce(topic, [(None, "line 30")])
    subprocess.run(command, env=env, check=True, capture_output=True)
    lines = out.read_text().splitlines()
    assert len(lines) == 31 and lines[-1] == "line 30"  # only the new record: it resumed from its offsets
