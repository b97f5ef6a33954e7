"""`bridgectl bridges add/remove` edit the bridges file with a round-trip YAML library: comments stay, and nothing
is written unless the whole file still loads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bridgectl.bridges_edit import add_entry, remove_entry
from connectors.bridges_file import BridgeConfigError, load_bridges

FILE = textwrap.dedent("""\
    # the team's bridges
    bridges:
      # orders go out
      - name: first
        connector: S3BlockGzipSinkConnector
        config: {topics: a, s3.bucket: bkt}

      - name: second   # clicks
        connector: S3BlockGzipSinkConnector
        config:
          topics: c
          s3.bucket: bkt
    # the end
    """)

NEW = {"name": "third", "connector": "S3BlockGzipSinkConnector", "mode": "continuous",
       "config": {"topics": "d", "s3.bucket": "bkt"}}


def test_an_added_bridge_loads_and_the_comments_stay(tmp_path):
    path = tmp_path / "bridges.yaml"
    path.write_text(FILE)
    add_entry(path, NEW)
    text = path.read_text()
    assert [b.name for b in load_bridges(path)] == ["first", "second", "third"]
    assert load_bridges(path)[2].mode == "continuous"
    assert "# the team's bridges" in text and "# orders go out" in text and "# clicks" in text
    assert text.index("name: third") > text.index("s3.bucket: bkt\n", text.index("name: second"))


def test_an_invalid_or_duplicate_bridge_writes_nothing(tmp_path):
    path = tmp_path / "bridges.yaml"
    path.write_text(FILE)
    with pytest.raises(BridgeConfigError, match="(?s)nothing written: .*bridges.yaml.*key .s3.buckt.: unknown key"):
        add_entry(path, {**NEW, "config": {"topics": "d", "s3.buckt": "bkt"}})
    with pytest.raises(BridgeConfigError, match="'first' exists already"):
        add_entry(path, {**NEW, "name": "first"})
    assert path.read_text() == FILE
    assert not list(tmp_path.glob(".bridges.yaml.*"))  # no temporary file left behind


def test_a_secret_is_taken_only_as_a_reference(tmp_path):
    path = tmp_path / "bridges.yaml"
    path.write_text(FILE)
    secret = {"name": "s", "connector": "CloudPubSubSinkConnector",
              "config": {"topics": "t", "cps.project": "p", "cps.topic": "t", "gcp.credentials.json": "{\"k\": 1}"}}
    with pytest.raises(BridgeConfigError, match="is a secret") as error:
        add_entry(path, secret)
    assert '"k"' not in str(error.value) and path.read_text() == FILE


def test_a_removed_bridge_leaves_the_others_and_their_comments(tmp_path):
    path = tmp_path / "bridges.yaml"
    path.write_text(FILE)
    remove_entry(path, "first")
    assert [b.name for b in load_bridges(path)] == ["second"]
    assert "# clicks" in path.read_text() and "topics: a" not in path.read_text()
    remove_entry(path, "second")
    with pytest.raises(BridgeConfigError, match="no bridge named 'second'"):
        remove_entry(path, "second")
    add_entry(path, NEW)  # into the emptied list
    assert [b.name for b in load_bridges(path)] == ["third"] and "# the end" in path.read_text()


@pytest.mark.parametrize("listing", ["bridges: []  # none yet\n", "bridges: [{name: first, connector: "
                                     "S3BlockGzipSinkConnector, config: {topics: a, s3.bucket: bkt}}]\n"])
def test_a_bridge_is_added_to_an_empty_or_flow_style_list(tmp_path, listing):
    path = tmp_path / "bridges.yaml"
    path.write_text("# ours\n" + listing + "# after the list\n")
    add_entry(path, NEW)
    before = ["first"] if "first" in listing else []
    assert [b.name for b in load_bridges(path)] == [*before, "third"]
    text = path.read_text()
    assert text.startswith("# ours\n") and text.endswith("# after the list\n")
    assert ("# none yet" in text) == ("none yet" in listing)
    remove_entry(path, "third")
    assert [b.name for b in load_bridges(path)] == before and text.endswith("# after the list\n")


def test_the_shipped_file_changes_only_by_the_added_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://127.0.0.1:18081/apis/ccompat/v7")  # as the local stack sets it
    root = Path(__file__).resolve().parents[2]
    shipped = (root / "bridges.yaml").read_text()
    (tmp_path / "config").symlink_to(root / "config")  # the properties files it names
    path = tmp_path / "bridges.yaml"
    path.write_text(shipped)
    add_entry(path, NEW)
    text = path.read_text()
    assert text.startswith(shipped.rstrip("\n")) and "name: third" in text[len(shipped.rstrip("\n")):]
    remove_entry(path, "third")
    assert path.read_text() == shipped


def test_the_cli_adds_a_bridge_always_on_by_default_and_to_a_host(tmp_path):
    from click.testing import CliRunner

    from bridgectl.bridges_cli import bridges

    path = tmp_path / "bridges.yaml"
    path.write_text(FILE)
    common = ["--connector", "S3BlockGzipSinkConnector", "--set", "topics=d", "--set", "s3.bucket=bkt",
              "--file", str(path), "--url", "http://127.0.0.1:9"]  # no deployment there: the file only
    result = CliRunner().invoke(bridges, ["add", "hosted", "--host", "archive", *common])
    assert result.exit_code == 0, result.output
    hosted = load_bridges(path)[2]
    assert (hosted.mode, hosted.continuous.host) == ("continuous", "archive")

    before = path.read_text()
    result = CliRunner().invoke(bridges, ["add", "batched", "--mode", "batch", "--host", "archive", *common])
    assert isinstance(result.exception, BridgeConfigError)
    assert "continuous.host 'archive' needs mode: continuous" in str(result.exception)
    assert path.read_text() == before

    # Without --mode or --host the file gets neither: the load's defaults (always on, in the default host) apply.
    result = CliRunner().invoke(bridges, ["add", "plain", *common])
    assert result.exit_code == 0, result.output
    plain = load_bridges(path)[3]
    assert (plain.name, plain.mode, plain.continuous.host) == ("plain", "continuous", "default")
    assert "mode:" not in path.read_text()[len(before):]


def test_the_cli_names_a_bridge_from_its_properties_file_when_no_name_is_given(tmp_path):
    from click.testing import CliRunner

    from bridgectl.bridges_cli import bridges

    path = tmp_path / "bridges.yaml"
    path.write_text(FILE)
    sink = tmp_path / "sink.properties"
    sink.write_text("name=orders-to-archive\nconnector.class=S3BlockGzipSinkConnector\ntopics=o\ns3.bucket=bkt\n")
    result = CliRunner().invoke(bridges, ["add", "--properties", str(sink), "--file", str(path),
                                          "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 0, result.output
    assert "named orders_to_archive, from name=orders-to-archive" in result.output
    assert load_bridges(path)[-1].name == "orders_to_archive"

    sink.write_text("connector.class=S3BlockGzipSinkConnector\ntopics=o\ns3.bucket=bkt\n")
    before = path.read_text()
    result = CliRunner().invoke(bridges, ["add", "--properties", str(sink), "--file", str(path)])
    assert isinstance(result.exception, BridgeConfigError)
    assert "give the bridge's NAME (or a --properties file with name=)" in str(result.exception)
    assert path.read_text() == before
