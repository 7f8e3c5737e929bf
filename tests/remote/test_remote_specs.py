"""Which ``--tx`` workers are remote, the arguments such a worker is given, and what travels
between the controller and it: the cores, without pytest runs."""

from __future__ import annotations

import pytest

from pytest_maestro.phase.prompt import DependencyResult
from pytest_maestro.remote import RemoteError
from pytest_maestro.remote.specs import (
    any_remote,
    expand,
    gateway_ids,
    is_remote,
    names_worker,
    worker_arguments,
)
from pytest_maestro.remote.wire import Result, Start
from pytest_maestro.settings import Settings


@pytest.mark.parametrize(
    ("spec", "remote"),
    [
        ("popen", False),
        ("3*popen", False),
        ("popen//python=python3.12", False),
        ("popen//chdir=/tmp/a", True),
        ("2*popen//chdir=/tmp/a", True),
        ("ssh=user@host//python=python3", True),
        ("socket=192.168.1.4:8888", True),
        ("execmodel=main_thread_only//ssh=host", True),
    ],
)
def test_a_spec_is_remote_when_it_leaves_the_controller_s_directory(
    spec: str, remote: bool
) -> None:
    assert is_remote(spec) is remote


def test_a_run_is_remote_when_any_worker_is() -> None:
    assert any_remote(["popen", "ssh=h"])
    assert not any_remote(["popen", "popen"])


VALUES = ("--maestro", "--maestro-report", "--junitxml")
FLAGS = ("--maestro-fresh",)


def arguments(*args: str, here: tuple[str, ...] = ("plan.md", "report.md", "tests")) -> list[str]:
    return worker_arguments(args, lambda arg: arg.split("::")[0] in here, VALUES, FLAGS)


def test_a_path_an_option_takes_is_joined_to_it() -> None:
    assert arguments("--maestro", "plan.md", "--maestro-report", "report.md", "-v") == [
        "--maestro=plan.md",
        "--maestro-report=report.md",
        "-v",
    ]


def test_a_path_to_collect_is_left_to_the_plan_the_worker_is_given() -> None:
    given = ("--maestro=plan.md", "-v", "plan.md::a", "tests", "--maestro-fresh", "plan.md")
    assert arguments(*given) == ["--maestro=plan.md", "-v", "--maestro-fresh"]
    plugin = ("-p", "no:cacheprovider")
    assert arguments("-c", "plan.md", *plugin) == ["-cplan.md", *plugin]


def test_anything_else_is_left_as_it_is() -> None:
    given = ["--maestro=plan.md", "--tx", "ssh=host", "-k", "not slow", "missing.md"]
    assert arguments(*given) == given


def test_a_path_after_an_unknown_option_is_refused_naming_it() -> None:
    with pytest.raises(RemoteError, match=r"^argument 'tests' after --cov names a path"):
        arguments("--cov", "tests")


def test_a_start_and_a_result_come_back_as_they_went() -> None:
    start = Start(
        "p",
        "c" * 40,
        b"# v2 git bundle\n\x00\xff",
        "h" * 40,
        "refs/maestro/s/remote/gw0",
        "sub/",
        "session",
        (DependencyResult("a", "A", "COMPLETED: done", {"warnings": "none"}),),
        ("finding",),
    )
    assert Start.from_wire(start.to_wire()) == start
    result = Result("host:/w", "c" * 40, b"diff --git a/x b/x\n\x00", 21, logs={"p.log": b"\xff"})
    assert Result.from_mapping(result.to_dict()) == result
    assert Result.from_mapping(result.without_payload()).diff is None


def test_a_malformed_result_is_one_line() -> None:
    with pytest.raises(RemoteError, match=r"^a remote phase's result is malformed: "):
        Result.from_mapping({"host": "h", "start": "c", "diff": "not base64!", "size": 1})
    with pytest.raises(RemoteError, match=r"^a phase's start from the controller is malformed"):
        Start.from_wire({"phase": "p"})


def test_settings_come_back_as_they_went() -> None:
    class Config:
        def getoption(self, name: str) -> object:
            given = {
                "maestro": "plan.md",
                "maestro_max_concurrent_calls": ["claude=3"],
                "maestro_worker_runtimes": ["gw0:claude,shell", "ssh=me@b1:"],
            }
            return given.get(name, False if name in ("maestro_fresh",) else None)

        def getini(self, name: str) -> object:
            return ""

    settings = Settings.from_config(Config(), env={})
    assert Settings.from_wire(settings.to_wire()) == settings
    assert settings.max_concurrent_calls == (("claude", 3),)
    assert settings.worker_runtimes == (("gw0", ("claude", "shell")), ("ssh=me@b1", ()))


def test_specs_are_one_per_worker_with_the_ids_execnet_gives_them() -> None:
    specs = expand(["2*popen//chdir=/a", "ssh=me@b1//id=build1", "socket=h:8888"])
    assert specs == ["popen//chdir=/a", "popen//chdir=/a", "ssh=me@b1//id=build1", "socket=h:8888"]
    assert gateway_ids(specs) == ["gw0", "gw1", "build1", "gw2"]


@pytest.mark.parametrize(
    "spec", ["+2*popen", " 2*popen", "1_0*popen", "\u00b2*popen", "two*popen", "0*popen", "popen"]
)
def test_specs_are_counted_as_xdist_counts_them(spec: str) -> None:
    """A count xdist reads (``int``) starts that many workers, one it cannot read starts the spec
    as written: the same list here, so that each name lines up with its worker, and never a
    traceback (``\u00b2`` is a digit to ``str.isdigit``, not to ``int``)."""
    from xdist import workermanage

    # The name changed in pytest-xdist 3.7 (``parse_spec_config`` before), the reading did not.
    parse = getattr(workermanage, "parse_tx_spec_config", None) or workermanage.parse_spec_config

    class Config:
        def getvalue(self, name: str) -> list[str]:
            return [spec, "ssh=me@b1"]

    assert expand([spec, "ssh=me@b1"]) == parse(Config())


def test_an_override_names_a_worker_by_its_id_or_parts_of_its_spec() -> None:
    spec = "execmodel=main_thread_only//ssh=me@b1//python=/v/bin/python"
    assert names_worker("gw3", "gw3", spec)
    assert names_worker("ssh=me@b1", "gw3", spec)
    assert names_worker("ssh=me@b1//python=/v/bin/python", "gw3", spec)
    assert not names_worker("ssh=me@b2", "gw3", spec)
    assert not names_worker("gw0", "gw3", spec)
    assert names_worker("popen", "gw0", "popen//chdir=/a")
