"""JUnit XML: one testcase per phase, facts as properties, valid against the xunit2 schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import phase, write_plan

# The JUnit 10 schema (MIT, Gregory Boissinot) that CI systems validate against, shipped here.
SCHEMA = Path(__file__).resolve().parent / "fixtures" / "junit-10.xsd"


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
