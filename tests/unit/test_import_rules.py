"""The runtime stands alone: nothing a deployment runs imports the developer CLI (`bridgectl`: the bridges' commands,
the demo) or the local stack (`local_stack`: its servers and downloads), so a deployment need not ship them. And the
code stands in floors: no two files import each other round a circle, and no folder imports one that imports it back
(no import runs back up). Checked on the source, every import statement, those inside functions and under TYPE_CHECKING included."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_PACKAGES = ("connectors", "asset_metadata", "bridge_assets", "bridge_metrics", "resources", "jobs", "sensors", "health")
FORBIDDEN = ("bridgectl", "local_stack")


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
        if module.split(".")[0] in FORBIDDEN
    ]
    assert offenders == []


def test_the_rule_sees_an_import_inside_a_function():
    tree = ast.parse("def f():\n    from local_stack.paths import cache_dir\n    import local_stack.fetch\n")
    assert [m for _, m in _imported_modules(tree)] == ["local_stack.paths", "local_stack.fetch"]


# The rooms of the house: each top-level package, and under connectors/ each sub-package and each module.
HOUSE = (*RUNTIME_PACKAGES, "bridgectl", "local_stack", "bench")


def _module_file(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _import_graph() -> dict[Path, set[Path]]:
    """file -> the files of the house it imports (`from a.b import c` also names a.b.c when that is a module)."""
    graph: dict[Path, set[Path]] = collections.defaultdict(set)
    for package in HOUSE:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                modules = []
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                for module in modules:
                    target = _module_file(module)
                    if target is not None and target != path:
                        graph[path].add(target)
    return graph


def _room(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    if parts[0] == "connectors" and len(parts) > 2:
        return f"connectors/{parts[1]}/"
    return "/".join(parts) if parts[0] == "connectors" else f"{parts[0]}/"


def _circles(graph: dict) -> list[list]:
    """The strongly connected parts of more than one node (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in graph.get(node, ()):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_files_import_each_other_round_a_circle():
    circles = _circles(_import_graph())
    assert circles == [], [[str(path.relative_to(ROOT)) for path in circle] for circle in circles]


def test_no_import_runs_back_up_between_folders():
    rooms: dict[str, set[str]] = collections.defaultdict(set)
    for path, targets in _import_graph().items():
        rooms[_room(path)] |= {_room(target) for target in targets} - {_room(path)}
    assert _circles(rooms) == []


def test_the_circle_check_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
