"""The package's structure rules, checked on its source: no import cycle, private pytest and
xdist APIs only in ``_compat.py``, no ``global``, no pointer to documents outside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pytest_maestro

PACKAGE = Path(pytest_maestro.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {module_name(path): path for path in MODULES}


def imports(path: Path) -> set[str]:
    """Every package module ``path`` imports: at the top, inside functions and under
    TYPE_CHECKING alike."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = node.module or ""
            if node.level:
                target = f"{base}.{target}" if target else base
            for alias in node.names:  # ``from . import x`` may name a submodule
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in NAMES else target)
    return {module for module in found if module in NAMES and module != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_import_graph_has_no_cycle() -> None:
    graph = {name: imports(path) for name, path in NAMES.items()}
    assert graph["pytest_maestro.session"], "the import scan found nothing: it is broken"
    assert find_cycle(graph) is None


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# Names that belong to pytest's or xdist's internals, or to another plugin's state.
PRIVATE = re.compile(
    r"\b_pytest\b|\bxdist\.(?!newhooks)\w|_use_item_location|global_properties|node_reporter"
    r"|\blastfailed\b|\"dsession\"|\"lfplugin\"|\bshuttingdown\b|\._session\b|add_global_property"
)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_private_apis_only_in_compat(path: Path) -> None:
    if path.name == "_compat.py":
        return
    code = [
        line
        for line in path.read_text().splitlines()
        if not line.lstrip().startswith("#") and PRIVATE.search(line)
    ]
    assert code == []


def test_compat_holds_the_private_apis() -> None:
    assert PRIVATE.search((PACKAGE / "_compat.py").read_text())


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_global_statement(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Global)]


OUTSIDE = re.compile(r"DESIGN(\.md| §)|\.\./shared|\bseed[ -](systems?|design|parallel|exec)")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_reference_outside_the_repository(path: Path) -> None:
    assert not [line for line in path.read_text().splitlines() if OUTSIDE.search(line)]
