"""Real plans written by other projects load as the plans they are.

The documents are not in this repository (they are other projects' files, copied unchanged):
``MAESTRO_TEST_CORPUS`` names a folder holding the plans below, ``MAESTRO_TEST_SEEDS`` one
holding the specifications of the orchestrators this tool follows; each test skips without its
folder. The expected numbers below were counted by reading the documents, not taken from the
readers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_maestro.plan import PlanError, detect_format, load_plan
from pytest_maestro.plan.formats import maestro_md, steps, superpowers, tasklist
from pytest_maestro.plan.model import Plan
from pytest_maestro.plan.source import Source

from ..helpers import FIXTURES


def folder(variable: str) -> Path | None:
    named = os.environ.get(variable)
    return Path(named).resolve() if named and Path(named).is_dir() else None


# Where a variable names no folder, a path that is none: the tests that read it skip.
NOWHERE = FIXTURES / "no such folder"
CORPUS = folder("MAESTRO_TEST_CORPUS") or NOWHERE
SEEDS = folder("MAESTRO_TEST_SEEDS") or NOWHERE
MARKDOWN_READERS = (maestro_md, tasklist, steps, superpowers)

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="MAESTRO_TEST_CORPUS names no folder of real plans"
)


def corpus_plan(name: str) -> Plan:
    return load_plan(CORPUS / name)


def deps(plan: Plan) -> dict[str, tuple[str, ...]]:
    return {phase.id: phase.blocked_by for phase in plan.phases}


@pytest.mark.parametrize(
    ("name", "format", "count"),
    [
        ("maestro-template.md", "maestro-md", 1),
        ("sp-opencode.md", "superpowers", 18),
        ("maestro-dev-theme.md", "superpowers", 9),
        ("nmg-draft.md", "tasklist", 32),
        ("engine-template-head.md", "steps", 7),
        ("engine-template-old.md", "steps", 7),
    ],
)
def test_corpus_plan_format_and_phase_count(name: str, format: str, count: int) -> None:
    path = CORPUS / name
    assert detect_format(Source.read(path)) == format
    plan = load_plan(path)
    assert plan.format == format
    assert len(plan.phases) == count
    # exactly one Markdown reader claims the document
    claims = [r.NAME for r in MARKDOWN_READERS if r.detect(Source.read(path))]
    assert claims == [format]


@pytest.mark.parametrize("name", ["claude-do-design-v2.md", "README.md"])
def test_corpus_documents_that_are_not_plans(name: str) -> None:
    """The /design skill describes plan.json; its "## Phase 1" headings are steps of the skill."""
    with pytest.raises(PlanError, match="no phases found"):
        load_plan(CORPUS / name)


@pytest.mark.skipif(not SEEDS.is_dir(), reason="MAESTRO_TEST_SEEDS names no folder")
@pytest.mark.parametrize(
    "name",
    [
        "design-execute-skill.md",
        "execution-protocols.md",
        "maestro-execution-skill.md",
        "parallel-handoff.md",
    ],
)
def test_seed_specifications_are_not_plans(name: str) -> None:
    path = SEEDS / name
    source = Source.read(path)
    assert [r.NAME for r in MARKDOWN_READERS if r.detect(source)] == []


def test_maestro_template() -> None:
    plan = corpus_plan("maestro-template.md")
    assert plan.title == "<topic> Implementation Plan"
    phase = plan.phase("1")
    assert phase.line == 31
    assert phase.name == "Phase 1"  # "<Phase Name>" is a placeholder
    assert (phase.agent, phase.parallel, phase.blocked_by) == (None, True, ())
    assert phase.files.create == ("path/to/file",)
    assert phase.files.modify == ("path/to/existing/file",)
    assert phase.acceptance == ()  # "[Commands to run and expected outcomes]" is a placeholder
    assert "[Clear, measurable statement of what this phase delivers]" in phase.description
    assert "## Plan Overview" in plan.context


def test_sp_opencode_tasks_groups_and_files() -> None:
    plan = corpus_plan("sp-opencode.md")
    assert plan.title == "OpenCode Support Implementation Plan"
    assert plan.ids == tuple(f"task-{n}" for n in range(1, 19))
    lines = {"task-1": 15, "task-5": 333, "task-9": 445, "task-13": 760, "task-18": 1041}
    assert {pid: plan.phase(pid).line for pid in lines} == lines
    # no dependencies are written: each task follows the previous one
    assert deps(plan)["task-1"] == ()
    assert deps(plan)["task-5"] == ("task-4",)
    assert deps(plan)["task-18"] == ("task-17",)
    groups = {1: "phase-1", 4: "phase-1", 5: "phase-2", 12: "phase-3", 14: "phase-4", 16: "phase-5"}
    assert {n: plan.phase(f"task-{n}").tags for n in groups} == {
        n: (tag,) for n, tag in groups.items()
    }
    task1 = plan.phase("task-1")
    assert task1.files.create == ("lib/skills-core.js",)
    assert task1.reads == (".codex/superpowers-codex",)  # "- Reference:"
    assert plan.phase("task-6").files.modify == (".codex/superpowers-codex",)
    assert plan.phase("task-9").files.create == (".opencode/plugin/superpowers.js",)
    assert plan.phase("task-13").files.create == (".opencode/INSTALL.md",)
    assert plan.phase("task-15").files.modify == ("RELEASE-NOTES.md",)
    # Task 16 only runs the script it names under "- Test:"; Task 18's "- Check:" is no file
    assert plan.phase("task-16").files.all() == ()
    assert plan.phase("task-16").reads == (".codex/superpowers-codex",)
    assert plan.phase("task-18").files.all() == ()


def test_sp_opencode_checks() -> None:
    plan = corpus_plan("sp-opencode.md")
    # only Task 2 has an Expected that says the command succeeds ("No output (success)")
    checks = {p.id: [c.check for c in p.acceptance] for p in plan.phases if p.acceptance}
    assert checks == {"task-2": ["node -c lib/skills-core.js"]}


def test_sp_opencode_embedded_readme_stays_in_its_task() -> None:
    """Task 13 embeds a README whose nested code fences let "## Usage" out as a heading."""
    plan = corpus_plan("sp-opencode.md")
    description = plan.phase("task-13").description
    assert "### Personal Skills" in description
    assert "Run: `ls -l .opencode/INSTALL.md`" in description
    assert "## Success Criteria" not in plan.phase("task-18").description


def test_maestro_dev_theme() -> None:
    plan = corpus_plan("maestro-dev-theme.md")
    assert plan.title == "Extension Settings, Theme & Parallel Execution Implementation Plan"
    assert all(phase.tags == () for phase in plan.phases)  # no group headings
    assert deps(plan)["task-9"] == ("task-8",)
    assert plan.phase("task-1").files.modify == ("gemini-extension.json",)
    assert plan.phase("task-2").files.create == ("GEMINI.md",)
    assert plan.phase("task-4").line == 312
    assert plan.phase("task-4").files.modify == ("skills/execution/SKILL.md",)
    assert plan.phase("task-7").files.create == ("docs/research/parallel-subagent-execution.md",)
    assert plan.phase("task-9").files.all() == ()
    # "## Phase 1: Investigation" inside Task 7's code block is not structure
    assert "## Phase 1: Investigation" in plan.phase("task-7").description
    assert [c.check for c in plan.phase("task-9").acceptance] == ["gemini extensions link maestro/"]
    assert plan.phase("task-2").acceptance == ()  # Expected: `OK` does not say "passes"


def test_nmg_draft_tasks() -> None:
    plan = corpus_plan("nmg-draft.md")
    assert plan.title == "Tasks: Creating Issues Skill"
    assert plan.ids == tuple(f"T{n:03d}" for n in range(1, 33))
    assert plan.phase("T001").line == 46
    # The task names a folder (trailing /): declared paths are kept in normal form, one key a file
    assert plan.phase("T001").files.create == ("plugins/nmg-sdlc/skills/draft-issue",)
    assert plan.phase("T003").files.modify == ("plugins/nmg-sdlc/skills/draft-issue/SKILL.md",)
    assert plan.phase("T018").files.modify == (
        "plugins/nmg-sdlc/.claude-plugin/plugin.json",
        ".claude-plugin/marketplace.json",
        "CHANGELOG.md",
    )
    assert plan.phase("T026").files.modify == (
        "plugins/nmg-sdlc/skills/draft-issue/SKILL.md",
        "plugins/nmg-sdlc/skills/_shared/claude-design.*",
    )
    expected = {
        "T001": (),
        "T002": ("T001",),
        "T004": ("T002",),
        "T005": (),
        "T013": ("T011", "T012"),
        "T014": (),
        "T019": ("T008", "T014"),
        "T027": ("T025", "T026"),
        "T030": ("T022", "T023", "T024", "T025", "T026", "T028", "T029"),
    }
    assert {pid: deps(plan)[pid] for pid in expected} == expected
    assert deps(plan)["T018"] == tuple(f"T{n:03d}" for n in range(5, 18))
    assert deps(plan)["T031"] == tuple(f"T{n:03d}" for n in range(22, 31))
    assert plan.phase("T001").tags == ("phase-1",)
    assert plan.phase("T018").tags == ("phase-7",)
    assert plan.phase("T032").tags == ("phase-11",)


def test_nmg_draft_acceptance_criteria_are_prose() -> None:
    plan = corpus_plan("nmg-draft.md")
    counts = {"T001": 1, "T002": 4, "T008": 6, "T024": 9, "T032": 4}
    assert {pid: len(plan.phase(pid).acceptance) for pid in counts} == counts
    assert all(c.check is None for p in plan.phases for c in p.acceptance)
    assert plan.phase("T001").acceptance[0].criterion == (
        "Directory exists at `plugins/nmg-sdlc/skills/draft-issue/`"
    )


def test_engine_template_head_slash_ids() -> None:
    plan = corpus_plan("engine-template-head.md")
    assert plan.ids == ("1.1", "1.2", "2.1", "2.2", "2.3", "3.1", "3.2")
    assert deps(plan) == {
        "1.1": (),
        "1.2": ("1.1",),
        "2.1": ("1.2",),
        "2.2": ("2.1",),
        "2.3": ("2.1",),
        "3.1": ("2.2", "2.3"),
        "3.2": ("3.1",),
    }
    assert plan.phase("1.1").line == 85
    assert plan.phase("1.2").files.create == ("src/path/to/file.test.ts",)
    assert plan.phase("2.3").files.modify == ("src/path/to/file.ts", "src/path/to/file.test.ts")
    assert plan.phase("3.1").files.modify == ("src/path/to/engine.ts",)
    assert plan.phase("3.2").files.all() == ()  # "(none — verification only)"
    assert plan.phase("2.1").tags == ("section-2",)


def test_engine_template_old_step_ids() -> None:
    plan = corpus_plan("engine-template-old.md")
    assert plan.ids == tuple(f"step-{n}" for n in range(1, 8))
    assert deps(plan)["step-1"] == ()
    assert deps(plan)["step-5"] == ("step-3",)
    assert deps(plan)["step-6"] == ("step-4", "step-5")
    assert plan.phase("step-1").line == 83
    assert plan.phase("step-2").acceptance[0].criterion == "Test fails as expected."
    assert plan.phase("step-2").acceptance[0].check is None
    assert plan.phase("step-4").tags == ("phase-2",)
