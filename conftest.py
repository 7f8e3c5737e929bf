from __future__ import annotations

import importlib
import pkgutil

import pytest

import pytest_maestro

# Every module of the package, imported once here, before pytester snapshots sys.modules: the
# plugin imports most of them only where a run uses them, and an in-process run forgets what it
# imported, so each run would import them again (and, without bytecode caches, compile them).
for _module in pkgutil.walk_packages(pytest_maestro.__path__, "pytest_maestro."):
    importlib.import_module(_module.name)

pytest_plugins = ["pytester"]
# Projects the example plans build, with their own tests: copied into a tmp dir to run, never here.
collect_ignore = ["tests/fixtures/projects", "tests/fixtures/solutions"]


# What pytest runs inside tests leave out: hypothesis' plugin and anyio's (which imports asyncio),
# a third of a short run's start; and assertion rewriting, which in-process runs would redo
# for every plugin module they import again.
LEAN_ADDOPTS = "-p no:hypothesispytest -p no:anyio --assert=plain"


@pytest.fixture(autouse=True)
def _lean_inner_pytest(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest runs inside tests, in process or as a subprocess of pytester or of the test's own,
    load neither those plugins nor assertion rewriting.

    Set after pytester starts, which clears PYTEST_ADDOPTS.
    """
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
        # Inner runs append their report to a GitHub step summary: not to this job's own.
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", LEAN_ADDOPTS)


@pytest.fixture(autouse=True)
def _a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root in many CI containers: claude (and its stand-in) refuses to skip
    permissions as root unless IS_SANDBOX says the machine is a sandbox, as a test machine is.
    A test of that refusal deletes it."""
    monkeypatch.setenv("IS_SANDBOX", "1")
