"""Every package pyproject.toml declares is used: imported by the project's code, or one of the few the project runs
as a program or that a declared package imports for it (each with its reason below). A dependency nothing uses is
dropped, not kept "in case"."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib

from local_stack.paths import PROJECT_ROOT

# Used without an import of their own, and how.
USED_OTHERWISE = {
    "dagster-webserver": "the UI that `dagster dev` and `bridgectl dev` serve",
    "dagster-dg-cli": "`dg dev` and `dg launch --assets`",
    "moto": "the local stack's S3 and Kinesis (`python -m moto.server`)",
    # confluent-kafka's Schema Registry client and serdes import these (its extras cannot be installed: pyproject).
    "httpx2": "confluent_kafka.schema_registry",
    "authlib": "confluent_kafka.schema_registry",
    "cachetools": "confluent_kafka.schema_registry",
    "jsonschema": "confluent_kafka.schema_registry's JSON Schema serdes",
}
FOLDERS = ("connectors", "bridge_assets", "bridgectl", "resources", "sensors", "jobs", "health", "asset_metadata",
           "bridge_metrics", "bench", "examples", "tests")


def _imported_top_names() -> set[str]:
    names: set[str] = set()
    for folder in FOLDERS:
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module.split(".")[0])
    return names


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_every_declared_dependency_is_used():
    declared = [re.match(r"[A-Za-z0-9_.-]+", line).group(0) for line in
                tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    modules_of: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            modules_of.setdefault(_normal(distribution), set()).add(module)
    imported = _imported_top_names()
    unused = [name for name in declared
              if _normal(name) not in USED_OTHERWISE and not modules_of.get(_normal(name), set()) & imported]
    assert unused == [], f"declared in pyproject.toml and used nowhere: {unused}"
    assert set(USED_OTHERWISE) <= {_normal(name) for name in declared}  # no reason kept for a dependency dropped
