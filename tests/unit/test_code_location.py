"""The code location loads lazily and once per version of the bridges file: Dagster calls `defs()` at every load of
the location in a process (seven times in one `dagster asset materialize`), and a build asks Pub/Sub and Lite for
lineage."""

from __future__ import annotations

import os

import yaml

from bridge_assets import defs


def test_the_definitions_are_built_once_per_version_of_the_bridges_file(tmp_path, monkeypatch):
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": "once", "connector": "S3BlockGzipSinkConnector", "config": {"topics": "t", "s3.bucket": "bkt"}}]}))
    monkeypatch.setenv("BRIDGES_FILE", str(path))
    first = defs()
    assert defs() is first
    assert [a.key.path[-1] for a in first.resolve_all_asset_specs() if a.key.path[-1] == "once"] == ["once"]

    path.write_text(path.read_text().replace("name: once", "name: twice"))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    second = defs()
    assert second is not first
    assert "twice" in {a.key.path[-1] for a in second.resolve_all_asset_specs()}
