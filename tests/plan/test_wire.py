"""A read plan handed to an xdist worker as text: the plan that comes back is the one that went."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_maestro.plan import Assumption, Check, Files, Phase, Plan, PlanError, load_plan
from pytest_maestro.plan.wire import plan_from_wire, plan_to_wire

from ..helpers import FIXTURES, REPO

PLANS = sorted([*(REPO / "example_plans").iterdir(), *(FIXTURES / "plans").glob("*.*")])


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.name)
def test_every_example_plan_comes_back_equal(path: Path) -> None:
    try:
        plan = load_plan(path)
    except PlanError:
        pytest.skip("not a plan this version reads")
    assert plan_from_wire(plan_to_wire(plan)) == plan


# Every field of the model set to something other than its default, so that one the wire would
# leave out or bring back in another shape (a list for a tuple, a mapping for a Files) is seen.
EVERY_PHASE_FIELD = Phase(
    id="p1",
    name="First phase",
    line=12,
    agent="backend",
    blocked_by=("p0",),
    files=Files(create=("src/a.py",), modify=("src/b.py",), delete=("src/c.py",)),
    reads=("docs/spec.md",),
    acceptance=(Check("it builds", "make"), Check("it reads well")),
    run=("make", "make test"),
    description="Builds the thing.\n\nIn two paragraphs: ünïcode too.",
    parallel=False,
    timeout=90.5,
    max_retries=3,
    estimate=12.0,
    tags=("core", "slow"),
    assumptions=(Assumption("a tool", "which make", "warning"), Assumption("a file")),
    fallback="ask",
    rollback_triggers=("tests fail",),
    constraints=("no network",),
    model="opus",
    runtime="claude",
    budget_usd=2.5,
    done=True,
    review="spec+quality",
    escalate_model="opus-max",
)
EVERY_PLAN_FIELD = Plan(
    path=Path("plans/plan.yaml"),
    format="native",
    phases=(EVERY_PHASE_FIELD, Phase("p0", "Zeroth phase")),
    title="A plan",
    context="Why.",
    root="..",
    tags=("plan-wide",),
    warnings=("a warning",),
    isolate_include=(".env",),
)


@pytest.mark.parametrize(
    "value",
    [
        EVERY_PLAN_FIELD,
        EVERY_PHASE_FIELD,
        EVERY_PHASE_FIELD.files,
        EVERY_PHASE_FIELD.acceptance[0],
        EVERY_PHASE_FIELD.assumptions[0],
    ],
    ids=lambda value: type(value).__name__,
)
def test_the_example_sets_every_field(value: object) -> None:
    assert dataclasses.is_dataclass(value)
    for field in dataclasses.fields(value):
        if field.default is not dataclasses.MISSING:
            assert getattr(value, field.name) != field.default, field.name
        elif field.default_factory is not dataclasses.MISSING:
            assert getattr(value, field.name) != field.default_factory(), field.name


def test_a_plan_with_every_field_set_comes_back_equal() -> None:
    back = plan_from_wire(plan_to_wire(EVERY_PLAN_FIELD))
    assert back == EVERY_PLAN_FIELD
    assert isinstance(back.phases[0].files.create, tuple)
    assert isinstance(back.path, Path)


def test_the_wire_is_json_text() -> None:
    """What execnet carries to a worker, whatever it can or cannot serialise itself."""
    assert json.loads(plan_to_wire(EVERY_PLAN_FIELD))["phases"][0]["id"] == "p1"
