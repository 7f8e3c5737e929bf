"""The plan package's modules import one another without a cycle.

Every import counts: at the top of a module, inside a function and under ``TYPE_CHECKING``. A
cycle that an import inside a function hides still ties the modules together, and breaks as soon
as someone moves that import to the top.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest_maestro.plan

PACKAGE = Path(pytest_maestro.plan.__file__).parent
PREFIX = "pytest_maestro.plan"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PREFIX, *parts))


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the file imports, anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = ".".join(part for part in (base if node.level else "", node.module) if part)
            for alias in node.names:
                # "from . import markdown" imports a module; "from . import paused_gc", the package
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else source)
    return {module for module in found if module in modules and module != name}


def import_graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in files}
    return {module_name(path): imported_modules(path, modules) for path in files}


def test_the_import_graph_is_read_in_full() -> None:
    graph = import_graph()
    assert "pytest_maestro.plan.graph" in graph["pytest_maestro.plan.validate"]
    assert "pytest_maestro.plan.gc_pause" in graph["pytest_maestro.plan.graph"]
    assert "pytest_maestro.plan.formats.markdown" in graph["pytest_maestro.plan.formats.tasklist"]
    assert "pytest_maestro.plan.formats" in graph["pytest_maestro.plan"]


def test_the_plan_package_has_no_import_cycle() -> None:
    sorter = graphlib.TopologicalSorter(import_graph())
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        raise AssertionError("import cycle: " + " -> ".join(error.args[1])) from None
