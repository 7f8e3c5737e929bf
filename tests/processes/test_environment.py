"""The environment a phase's commands get: ``os.environ`` as it is at each phase."""

from __future__ import annotations

import os

import pytest

from pytest_maestro.processes.process import environment


def test_the_environment_is_os_environ_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    assert environment() == dict(os.environ)
    monkeypatch.setenv("MAESTRO_TEST_VAR", "first ü")
    assert environment()["MAESTRO_TEST_VAR"] == "first ü"
    monkeypatch.setenv("MAESTRO_TEST_VAR", "second")  # a value decoded before is not kept
    assert environment()["MAESTRO_TEST_VAR"] == "second"
    monkeypatch.delenv("MAESTRO_TEST_VAR")
    assert "MAESTRO_TEST_VAR" not in environment()
    assert environment() == dict(os.environ)


@pytest.mark.skipif(os.name != "posix", reason="undecodable bytes in the environment: POSIX")
def test_an_undecodable_variable_comes_as_os_environ_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(os.environb, b"MAESTRO_TEST_RAW", b"\xff\xfe")
    assert environment()["MAESTRO_TEST_RAW"] == os.environ["MAESTRO_TEST_RAW"] == "\udcff\udcfe"
