from __future__ import annotations

import importlib
import os
import pkgutil
import signal
from pathlib import Path

import pytest

import pytest_maestro

# Every module of the package, imported once here, before pytester snapshots sys.modules: the
# plugin imports most of them only where a run uses them, and an in-process run forgets what it
# imported, so each run would import them again (and, without bytecode caches, compile them).
for _module in pkgutil.walk_packages(pytest_maestro.__path__, "pytest_maestro."):
    importlib.import_module(_module.name)

pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C is a KeyboardInterrupt in every process of the suite, as in a terminal. A shell
    starts what it runs in the background (``cmd &`` without job control) with SIGINT ignored;
    Python leaves an ignored SIGINT ignored, and so does every process it starts: the tests that
    Ctrl-C a run they started would wait for it until their timeout, the run still going."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# Projects the example plans build, with their own tests: copied into a tmp dir to run, never here.
collect_ignore = ["tests/fixtures/projects", "tests/fixtures/solutions"]


# What pytest runs inside tests leave out: hypothesis' plugin and anyio's (which imports asyncio),
# a third of a short run's start; and assertion rewriting, which in-process runs would redo
# for every plugin module they import again.
LEAN_ADDOPTS = "-p no:hypothesispytest -p no:anyio --assert=plain"


@pytest.fixture(scope="session")
def _bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of bytecode for every process the suite's tests start, made fresh by this run.

    Where the environment forbids bytecode caches (PYTHONDONTWRITEBYTECODE), every process a test
    starts (an inner pytest, its xdist workers, a fake agent) would compile every module it
    imports: most of such a process's start. Under xdist the suite's workers share one folder,
    the parent of their own base temporary directories; Python writes each file atomically.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "pycache"


@pytest.fixture(autouse=True)
def _lean_inner_pytest(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, _bytecode_cache: Path
) -> None:
    """pytest runs inside tests, in process or as a subprocess of pytester or of the test's own,
    load neither those plugins nor assertion rewriting; the processes tests start share one
    bytecode cache, outside every tree a test looks at.

    Set after pytester starts, which clears PYTEST_ADDOPTS.
    """
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
        # Inner runs append their report to a GitHub step summary: not to this job's own.
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", LEAN_ADDOPTS)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(_bytecode_cache))


@pytest.fixture(autouse=True)
def _a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root in many CI containers: claude (and its stand-in) refuses to skip
    permissions as root unless IS_SANDBOX says the machine is a sandbox, as a test machine is.
    A test of that refusal deletes it."""
    monkeypatch.setenv("IS_SANDBOX", "1")
