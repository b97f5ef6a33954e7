"""The code location loads the bridges file through its Component (bridge_assets/defs/bridges/defs.yaml), lazily
and once per version of the file: Dagster loads the location again and again (seven times in one `dagster asset
materialize`), and a build asks Pub/Sub and Lite for lineage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

import bridge_assets.component
from bridge_assets import code_location


def _bridges_file(path, name: str) -> str:
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": name, "connector": "S3BlockGzipSinkConnector", "config": {"topics": "t", "s3.bucket": "bkt"}}]}))
    return str(path)


def _asset_names(defs) -> set[str]:
    return {spec.key.path[-1] for spec in defs.resolve_all_asset_specs()}


def test_the_definitions_are_built_once_per_version_of_the_bridges_file(tmp_path, monkeypatch):
    path = tmp_path / "bridges.yaml"
    monkeypatch.setenv("BRIDGES_FILE", _bridges_file(path, "once"))
    builds = []
    build = bridge_assets.component.build_definitions
    monkeypatch.setattr(bridge_assets.component, "build_definitions", lambda p: builds.append(p) or build(p))
    bridge_assets._loaded.cache_clear()

    first = code_location()
    assert code_location() is first
    assert "once" in _asset_names(first) and "once" in _asset_names(code_location())
    assert builds == [str(path)]

    path.write_text(path.read_text().replace("name: once", "name: twice"))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    assert "twice" in _asset_names(code_location())
    assert builds == [str(path), str(path)]


def _snapshot_bytes(tmp_path, bridges: int) -> tuple[int, set[str]]:
    from dagster._core.remote_representation.external_data import RepositorySnap
    from dagster._serdes import serialize_value

    from bridge_assets.definitions import build_definitions

    path = tmp_path / f"bridges-{bridges}.yaml"
    path.write_text(yaml.safe_dump({"bridges": [{
        "name": f"hosted_{i}", "connector": "S3BlockGzipSinkConnector",
        "config": {"topics": f"t{i}", "s3.bucket": "bkt"}} for i in range(bridges)]}))
    repository = build_definitions(str(path)).get_repository_def()
    return (len(serialize_value(RepositorySnap.from_def(repository))),
            {job.name for job in repository.get_all_jobs()})


def test_a_hosts_snapshot_grows_with_its_members_not_their_square(tmp_path):
    # Dagster's daemon loads the code location's snapshot again every minute. A job per member of a host carried the
    # host step's whole snapshot (every member's outputs and checks): 2.6 MB at thirty bridges, 12.7 MB at a hundred.
    ten, jobs = _snapshot_bytes(tmp_path, 10)
    forty, _ = _snapshot_bytes(tmp_path, 40)
    assert not any(name.startswith("hosted_") for name in jobs), jobs
    assert "host_default_job" in jobs
    assert forty < 2.5 * ten, (ten, forty)  # 1.8x here; 4.8x with a job per member


def test_building_the_definitions_leaves_arrow_pandas_and_the_lite_client_unloaded(tmp_path):
    # A code server only builds the definitions, and holds for as long as it runs what that imported: Arrow, numpy
    # and pandas held 36 MB of its memory at thirty bridges. Runs import them when they move records. Pub/Sub Lite's
    # client library costs every load a fifth of a second; only Lite bridges and migrations need it.
    path = tmp_path / "bridges.yaml"
    path.write_text(yaml.safe_dump({"bridges": [
        {"name": "hosted", "connector": "S3BlockGzipSinkConnector", "config": {"topics": "t", "s3.bucket": "bkt"}},
        {"name": "alone", "connector": "S3BlockGzipSinkConnector", "continuous": {"host": None},
         "config": {"topics": "u", "s3.bucket": "bkt"}},
        {"name": "batches", "connector": "S3BlockGzipSinkConnector", "mode": "batch",
         "config": {"topics": "v", "s3.bucket": "bkt"}}]}))
    heavy = ("pyarrow", "numpy", "pandas", "pyspark", "google.cloud.pubsublite_v1")
    probe = ("import json, sys, bridge_assets\n"
             "built = [s.key.path[-1] for s in bridge_assets.code_location().resolve_all_asset_specs()]\n"
             f"print(json.dumps({{'built': built, 'loaded': [m for m in {heavy!r} if m in sys.modules]}}))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "BRIDGES_FILE": str(path)}, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert {"alone", "batches", "hosted"} <= set(result["built"])  # the bridges' assets were built
    assert result["loaded"] == []


def test_a_process_that_loaded_the_code_location_skips_the_last_garbage_collections():
    # Walking a run's heap in the interpreter's last collections cost every Dagster process about a second of a core
    # after its work had ended; the exit hook freezes the heap, so those collections pass it by.
    probe = "import atexit, gc, bridge_assets\natexit._run_exitfuncs()\nprint(gc.get_freeze_count())\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 10_000  # the imported modules' objects, at least
