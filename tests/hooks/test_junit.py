"""JUnit XML: one testcase per phase, facts as properties, valid against the xunit2 schema."""

from __future__ import annotations

import os

import junitparser
import pytest
from lxml import etree

from ..helpers import FAKES, FIXTURES, assert_phases, phase, write_plan

# The JUnit 10 schema (MIT, Gregory Boissinot) that CI systems validate against, shipped here.
# Validated with lxml (libxml2's XSD validator: already a test dependency, and what many CI
# tools use), read back with junitparser, as CI plugins read JUnit files.
SCHEMA = FIXTURES / "junit-10.xsd"


def _plan(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase("a", "true"),
            phase("b", "false", blocked_by=["a"], max_retries=1),
            phase("c", "true", blocked_by=["b"]),
        ],
    )


def _properties(xml: object, path: str) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in xml.findall(path)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["sequential", "xdist"])
def test_xunit2_facts_in_suite_properties_and_valid(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    lxml = pytest.importorskip("lxml.etree")
    _plan(pytester)
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "--junitxml=out.xml", "-W", "error", *workers
    )
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    assert "warning" not in result.stdout.str().lower()
    tree = lxml.parse(str(pytester.path / "out.xml"))
    cases = tree.findall(".//testcase")
    assert sorted(c.get("name") for c in cases) == ["a", "b", "c"]
    props = _properties(tree, "./testsuite/properties/property")
    assert props["maestro.a.status"] == "completed"
    assert props["maestro.b.status"] == "failed"
    assert props["maestro.b.attempts"] == "2"
    assert props["maestro.c.status"] == "skipped"
    assert props["maestro.a.wave"] == "1" and props["maestro.b.wave"] == "2"
    assert props["maestro.a.agent"] == "shell"
    assert props["maestro.a.started"] <= props["maestro.a.finished"] <= props["maestro.b.started"]
    worker = props["maestro.a.worker"]
    assert worker.startswith("gw") if workers else worker == "main"
    assert props["maestro.phases"] == "3" and props["maestro.failed"] == "1"
    schema = lxml.XMLSchema(lxml.parse(str(SCHEMA)))
    assert schema.validate(tree), schema.error_log


def test_xunit1_facts_also_inside_each_testcase(pytester: pytest.Pytester) -> None:
    lxml = pytest.importorskip("lxml.etree")
    _plan(pytester)
    pytester.runpytest(
        "--maestro", "plan.yaml", "--junitxml=out.xml", "-o", "junit_family=xunit1"
    ).assert_outcomes(passed=1, failed=1, skipped=1)
    tree = lxml.parse(str(pytester.path / "out.xml"))
    case = tree.find(".//testcase[@name='b']")
    props = _properties(case, "./properties/property")
    assert props["maestro.status"] == "failed"
    assert props["maestro.attempts"] == "2"


# -- read back as CI tools read it ---------------------------------------------------------------

FAMILIES = ["xunit1", "xunit2"]
WORKERS = {"sequential": [], "xdist": ["-n", "2"]}
CHECK = {"criterion": "the file exists", "check": "seq 40; test -f nothing"}


def _ci_plan(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase("early", "true"),
            phase("a", "echo hello from a"),
            phase("b", "echo trying", blocked_by=["a"], max_retries=1, acceptance=[CHECK]),
            phase("c", "true", blocked_by=["b"]),
        ],
    )


def _suite_properties(suite: junitparser.TestSuite) -> dict[str, str]:
    return {p.name: p.value for p in suite.properties()}


def _case_properties(case: junitparser.TestCase) -> dict[str, str]:
    found = case.child(junitparser.Properties)
    return {} if found is None else {p.name: p.value for p in found}


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_junit_read_back_as_ci_tools_do(
    pytester: pytest.Pytester, family: str, workers: list[str]
) -> None:
    _ci_plan(pytester)
    # An earlier run completes one phase (in process: it only prepares the session).
    first = pytester.runpytest("--maestro", "plan.yaml", "plan.yaml::early")
    first.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "--junitxml=out.xml", "-o", f"junit_family={family}",
        "-o", "junit_logging=system-out", "--maestro-circuit-breaker=0", "-W", "error", *workers,
    )  # fmt: skip
    assert_phases(result, passed=1, failed=1, skipped=1, earlier=1)
    [suite] = junitparser.JUnitXml.fromfile(str(pytester.path / "out.xml"))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 0, 2)
    cases = {case.name: case for case in suite}
    assert sorted(cases) == ["a", "b", "c", "early"]
    assert cases["a"].is_passed and "hello from a" in cases["a"].system_out
    [failure] = cases["b"].result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message == "check failed: the file exists"
    body = failure.text
    assert "phase 'b' (b) failed after 2 attempts" in body
    assert "$ seq 40; test -f nothing" in body and "exit code 1" in body
    assert "    | 40" in body and "    | 25" not in body  # the output's tail, bounded
    assert "log: .maestro/logs/b.log" in body
    [skipped] = cases["c"].result
    assert isinstance(skipped, junitparser.Skipped)
    assert skipped.message == "dependency 'b' failed"
    [earlier] = cases["early"].result
    assert earlier.message.startswith("completed in an earlier run at 20")
    props = _suite_properties(suite)
    assert props["maestro.b.status"] == "failed" and props["maestro.b.attempts"] == "2"
    assert props["maestro.c.status"] == "skipped"
    assert props["maestro.early.status"] == "completed"
    worker = props["maestro.a.worker"]
    assert worker.startswith("gw") if workers else worker == "main"
    assert props["maestro.phases"] == "4" and props["maestro.skipped"] == "1"
    inside = _case_properties(cases["b"])
    if family == "xunit1":
        assert inside["maestro.status"] == "failed" and inside["maestro.attempts"] == "2"
        assert inside["maestro.wave"] == "2"
    else:
        assert inside == {}
        schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
        tree = etree.parse(str(pytester.path / "out.xml"))
        assert schema.validate(tree), schema.error_log


def test_without_junit_logging_no_output_is_kept(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "echo hello from a")])
    pytester.runpytest("--maestro", "plan.yaml", "--junitxml=out.xml").assert_outcomes(passed=1)
    [suite] = junitparser.JUnitXml.fromfile(str(pytester.path / "out.xml"))
    [case] = suite
    assert not case.system_out


@pytest.mark.parametrize("family", FAMILIES)
def test_an_agent_phase_brings_tokens_cost_and_unverified(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    write_plan(
        pytester,
        [
            {"id": "ask", "description": "FAKE:TOKENS in=100 out=20 cost=0.01", "reads": ["R"]},
            {"id": "no", "description": "FAKE:FAIL", "reads": ["R"], "max_retries": 0},
        ],
    )
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "--junitxml=out.xml",
        "-o", f"junit_family={family}", "--maestro-circuit-breaker=0",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    [suite] = junitparser.JUnitXml.fromfile(str(pytester.path / "out.xml"))
    cases = {case.name: case for case in suite}
    props = _suite_properties(suite)
    expected = {"tokens_in": "100", "tokens_out": "20", "cost": "0.01", "unverified": "True"}
    assert {k: props[f"maestro.ask.{k}"] for k in expected} == expected
    if family == "xunit1":
        inside = _case_properties(cases["ask"])
        assert {k: inside[f"maestro.{k}"] for k in expected} == expected
    [failure] = cases["no"].result
    assert failure.message.startswith("FAILED: fake failure")  # the agent's status line
