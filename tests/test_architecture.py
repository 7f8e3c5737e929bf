"""The package's structure rules, checked on its source: the layers import only downwards, the
cores never import pytest, no import cycle, private pytest and xdist APIs only in ``_compat.py``,
no ``global``, no pointer to documents outside the repository."""

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


def external_imports(path: Path) -> set[str]:
    """The top-level names of everything ``path`` imports from outside the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - {"pytest_maestro"}


# The layers, lowest first (docs/architecture.md, "The layers"). A module imports from its own
# layer and the layers below it, never above; the key is the first name under the package (a
# subpackage or a top-level module; "" the package itself).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("numbers", "texts", "git"),
    ("plan",),
    ("state",),
    ("scheduling",),
    ("files",),
    ("processes",),
    ("runtimes",),
    ("isolation",),
    ("review",),
    ("phase",),
    ("remote",),
    ("views",),
    ("settings",),
    ("run",),
    ("hooks", "_compat"),
    ("plugin", "newhooks", ""),
)
RANK = {key: rank for rank, keys in enumerate(LAYERS) for key in keys}
PYTEST_LAYER = RANK["hooks"]
PYTEST_NAMES = {"pytest", "_pytest", "xdist", "execnet", "pluggy"}


def layer(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def layer_violations(module: str, imported: set[str], external: set[str]) -> list[str]:
    """What breaks the layer rules in ``module``'s imports, one text each."""
    own = layer(module)
    found = [
        f"{module} imports {other} from the layer above it"
        for other in sorted(imported)
        if RANK[layer(other)] > RANK[own]
    ]
    if RANK[own] < PYTEST_LAYER:
        found += [f"{module} imports {name}" for name in sorted(external & PYTEST_NAMES)]
    if own != "hooks" and module != "pytest_maestro.plugin":
        found += [
            f"{module} imports {other}: only plugin.py wires the pytest layer"
            for other in sorted(imported)
            if layer(other) == "hooks"
        ]
    return found


def test_every_module_has_a_layer() -> None:
    assert {layer(name) for name in NAMES} == set(RANK)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_a_module_imports_only_its_layer_and_those_below(path: Path) -> None:
    name = module_name(path)
    assert layer_violations(name, imports(path), external_imports(path)) == []


def test_the_layer_check_finds_each_kind_of_breach() -> None:
    assert layer_violations("pytest_maestro.plan.model", {"pytest_maestro.phase.runner"}, set())
    assert layer_violations("pytest_maestro.views.rows", set(), {"pytest"})
    assert layer_violations("pytest_maestro.newhooks", {"pytest_maestro.hooks.session"}, set())
    assert not layer_violations("pytest_maestro.hooks.session", {"pytest_maestro.run"}, {"pytest"})
    assert not layer_violations("pytest_maestro.plugin", {"pytest_maestro.hooks.session"}, set())


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
    assert graph["pytest_maestro.hooks.session"], "the import scan found nothing: it is broken"
    assert find_cycle(graph) is None


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# Names that belong to pytest's or xdist's internals, or to another plugin's state.
PRIVATE = re.compile(
    r"\b_pytest\b|\bxdist\.(?!newhooks)\w|_use_item_location|global_properties|node_reporter"
    r"|\blastfailed\b|\"dsession\"|\"lfplugin\"|\bshuttingdown\b|\._session\b|add_global_property"
    r"|\bsendevent\b|WorkerInteractor|runtest_protocol_complete"
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


# Documents that are not in the repository, by the names they go by: a pointer to one would send
# a reader nowhere. The pattern is split so that this file does not match it.
OUTSIDE = re.compile(
    r"DESIGN(\.md| §)|\.\./" + r"shared|\bseed[ -](systems?|design|parallel|exec)|§\s*\d"
)
TESTS = Path(__file__).parent
TEST_FILES = sorted(
    path
    for path in TESTS.rglob("*")
    if path.is_file()
    and "fixtures" not in path.relative_to(TESTS).parts
    and (path.suffix == ".py" or path.parent.name == "fakes")
)


def outside_references(text: str) -> list[str]:
    return [line for line in text.splitlines() if OUTSIDE.search(line)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_reference_outside_the_repository(path: Path) -> None:
    assert outside_references(path.read_text()) == []


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_tests_cite_only_files_in_the_repository(path: Path) -> None:
    assert outside_references(path.read_text()) == []


def test_the_outside_check_finds_each_kind() -> None:
    # Written in pieces, so that this file does not match the pattern it tests.
    found = ("see DESIGN \u00a75", "DESIGN" + ".md", "../" + "shared/corpus", "a seed " + "design")
    for line in (*found, "\u00a7 3"):
        assert outside_references(line) == [line]
    assert outside_references("seed=3, docs/architecture.md") == []


def splits_node_ids(path: Path) -> list[int]:
    """Lines that spell the node-id separator: a string that is ``::``, or an f-string part
    that starts or ends with it (not Mermaid's ``:::`` class)."""
    tree = ast.parse(path.read_text(), str(path))
    formatted = [node for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)]
    inside = {id(part) for node in formatted for part in node.values}
    found = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value == "::" and id(node) not in inside
    ]
    for node in formatted:
        texts = [p.value for p in node.values if isinstance(p, ast.Constant)]
        if any(
            isinstance(t, str) and ":::" not in t and (t.startswith("::") or t.endswith("::"))
            for t in texts
        ):
            found.append(node.lineno)
    return sorted(found)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_node_ids_are_read_and_written_in_one_place(path: Path) -> None:
    if module_name(path) != "pytest_maestro.hooks.nodeids":
        assert splits_node_ids(path) == []


def test_the_node_id_check_finds_a_split(tmp_path: Path) -> None:
    code = tmp_path / "code.py"
    code.write_text('a = x.rsplit("::", 1)\nb = f"{x}::{y}"\nc = "no :: here"\n')
    assert splits_node_ids(code) == [1, 2]
