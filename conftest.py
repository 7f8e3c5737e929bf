from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
# Projects the example plans build, with their own tests: copied into a tmp dir to run, never here.
collect_ignore = ["tests/fixtures/projects", "tests/fixtures/solutions"]


@pytest.fixture(autouse=True)
def _lean_inner_pytest(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest runs inside tests load neither hypothesis' plugin nor assertion rewriting.

    In-process runs re-import plugin modules every time, and rewriting them costs seconds per run.
    Set after pytester starts, which clears PYTEST_ADDOPTS.
    """
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
        monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest --assert=plain")
        # Inner runs append their report to a GitHub step summary: not to this job's own.
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(autouse=True)
def _a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root in many CI containers: claude (and its stand-in) refuses to skip
    permissions as root unless IS_SANDBOX says the machine is a sandbox, as a test machine is.
    A test of that refusal deletes it."""
    monkeypatch.setenv("IS_SANDBOX", "1")
