"""The runtime stands alone: nothing a deployment runs imports the developer CLI (`bridgectl`: the local stack,
downloads, the demo), so a deployment need not ship it. Checked on the source, every import statement."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_PACKAGES = ("connectors", "bridge_assets", "bridge_metrics", "resources", "jobs", "sensors", "health")
FORBIDDEN = "bridgectl"


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_no_runtime_module_imports_the_developer_cli():
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for package in RUNTIME_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
        for line, module in _imported_modules(ast.parse(path.read_text(), str(path)))
        if module == FORBIDDEN or module.startswith(FORBIDDEN + ".")
    ]
    assert offenders == []


def test_the_rule_sees_an_import_inside_a_function():
    tree = ast.parse("def f():\n    from bridgectl.paths import cache_dir\n    import bridgectl.fetch\n")
    assert [m for _, m in _imported_modules(tree)] == ["bridgectl.paths", "bridgectl.fetch"]
