"""What a process imports to start: pytest where the plugin is installed, with or without
--maestro, and an xdist worker of a run. Every pytest process imports plugin.py and every worker
configures a run, so each library or module imported there is paid for by every one of them:
what a process does not use is imported where it is used (bench/bench_startup.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_maestro

from ..helpers import phase, write_plan

# Libraries that cost a process tens of milliseconds to import, and that a run of commands on
# xdist workers needs in the controller at most.
HEAVY = ("yaml", "frontmatter", "markdown_it", "fastjsonschema", "jsonschema", "filelock")


def test_the_plugin_imports_no_heavy_library_and_nothing_of_a_run() -> None:
    """pytest imports the plugin in every process, --maestro or not."""
    code = (
        "import json, sys, pytest; before = set(sys.modules); import pytest_maestro.plugin; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported = set(json.loads(done.stdout))
    assert "pytest_maestro.plugin" in imported
    assert [name for name in HEAVY if name in imported] == []
    of_a_run = {"hooks", "run", "runtimes", "state", "phase", "processes", "isolation"}
    layers = {name: name.split(".")[1] for name in imported if name.count(".")}
    assert sorted(name for name, layer in layers.items() if layer in of_a_run) == []
    readers = sorted(name for name in imported if name.startswith("pytest_maestro.plan.formats."))
    assert readers == []


# What a worker records once it has run its phases: every module it has imported. A worker is
# told by its workerinput: PYTEST_XDIST_WORKER is also the controller's under an xdist run of
# this suite.
RECORD_MODULES = """
import json, sys

def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        with open("worker-modules", "w") as out:
            json.dump(sorted(sys.modules), out)
"""


@pytest.mark.slow
def test_a_worker_imports_neither_the_plan_readers_nor_what_it_does_not_run(
    pytester: pytest.Pytester,
) -> None:
    """The controller reads the YAML plan and hands it to the worker; the worker runs commands:
    no PyYAML, no reader, no schema, no lock library, no isolation, no scheduler, no outputs, no
    agent definition (read with PyYAML) for phases no agent plays, none of the review loop."""
    write_plan(pytester, [phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    pytester.makeconftest(RECORD_MODULES)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "1")
    result.assert_outcomes(passed=2)
    imported = set(json.loads((pytester.path / "worker-modules").read_text()))
    assert "pytest_maestro.phase.runner" in imported  # it did record a worker that ran phases
    assert [name for name in HEAVY if name in imported] == []
    not_on_a_worker = {
        "pytest_maestro.plan.formats.native",  # the reader: the worker is given the plan
        "pytest_maestro.plan.formats._schema_errors",
        "pytest_maestro.plan.validate",
        "pytest_maestro.isolation.worktree",  # no --maestro-isolate
        "pytest_maestro.hooks.scheduler",  # the controller's
        "pytest_maestro.run.recorder",  # the session: the controller's
        "pytest_maestro.views.outputs",
        "pytest_maestro.phase.review",  # nothing is reviewed
        "pytest_maestro.phase.rounds",
        "pytest_maestro.review.guard",
        "pytest_maestro.phase.final",  # no final review
        "pytest_maestro.phase.prompt",  # commands read no prompt
    }
    assert sorted(not_on_a_worker & imported) == []


# What imported each module of the package, in the process that decides and in a worker.
RECORD_LOADERS = """
import json, sys

def pytest_sessionfinish(session):
    who = "worker" if hasattr(session.config, "workerinput") else "controller"
    loaders = {
        name: type(module.__loader__).__name__
        for name, module in list(sys.modules.items())
        if name.startswith("pytest_maestro")
    }
    with open(f"loaders-{who}", "w") as out:
        json.dump(loaders, out)
"""


@pytest.mark.slow
def test_pytest_rewrites_no_module_of_the_package_past_its_root(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest rewrites the asserts of every module of a plugin's distribution; where it cannot
    write its own bytecode (PYTHONDONTWRITEBYTECODE, a read-only site-packages) it parsed,
    rewrote and compiled the package's hundred modules again in every process, the controller
    and each worker: a third of a second each. Python's import leaves them to their bytecode.
    The package is imported from a path entry, as from a wheel's install (an editable install's
    finder keeps pytest's hook from seeing it)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest -p no:anyio")  # rewriting on
    monkeypatch.setenv("PYTHONPATH", str(Path(pytest_maestro.__file__).parent.parent))
    write_plan(pytester, [phase("a", "true")])
    pytester.makeconftest(RECORD_LOADERS)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "1")
    result.assert_outcomes(passed=1)
    for who, used in (("controller", "run.orchestrator"), ("worker", "phase.runner")):
        loaders = json.loads((pytester.path / f"loaders-{who}").read_text())
        assert f"pytest_maestro.{used}" in loaders
        rewritten = {name for name, loader in loaders.items() if "Rewrit" in loader}
        assert rewritten <= {"pytest_maestro", "pytest_maestro._compat"}, (who, sorted(rewritten))


INNER_RUN = """
pytest_plugins = ["pytester"]


def test_inner(pytester):
    result = pytester.runpytest("-p", "no:maestro", "-p", "pytest_maestro.plugin", "--co")
    said = result.stdout.str() + result.stderr.str()
    assert "cannot be rewritten" not in said, said
    assert result.ret == 5, said  # nothing collected, nothing wrong
"""


@pytest.mark.slow
def test_a_run_inside_a_test_that_names_the_plugin_is_not_warned_of_its_import(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest warns of a plugin given by ``-p`` that is already imported other than through its
    rewriting, as the package now is, unless the module says it is not to be rewritten."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest -p no:anyio")  # rewriting on
    monkeypatch.setenv("PYTHONPATH", str(Path(pytest_maestro.__file__).parent.parent))
    pytester.makepyfile(test_inner=INNER_RUN)
    result = pytester.runpytest_subprocess("test_inner.py")
    result.assert_outcomes(passed=1)
