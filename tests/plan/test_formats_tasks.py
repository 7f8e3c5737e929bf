"""The task-list readers (spec-kit, Kiro / cc-sdd / OpenSpec, Taskmaster) on real files.

``tests/fixtures/plans/README.md`` names where each file comes from. The expected values were
read off the documents, not taken from the readers.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from pytest_maestro.plan import PlanError, detect_format, load_plan, not_a_plan
from pytest_maestro.plan.formats import maestro_md, numbered, speckit, steps, superpowers, tasklist
from pytest_maestro.plan.model import Plan
from pytest_maestro.plan.source import Source

from ..helpers import FIXTURES, REPO

PLANS = FIXTURES / "plans"
EXAMPLES = REPO / "example_plans"
OLD_MARKDOWN_READERS = (maestro_md, tasklist, steps, superpowers)


def deps(plan: Plan) -> dict[str, tuple[str, ...]]:
    return {phase.id: phase.blocked_by for phase in plan.phases}


def write(tmp_path: Path, text: str, name: str = "tasks.md") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "format", "count"),
    [
        ("speckit-template.md", "speckit", 28),
        ("speckit-template-2025-08.md", "speckit", 23),
        ("speckit-flow-kafka.md", "speckit", 22),
        ("speckit-aeon-observability.md", "speckit", 14),
        ("speckit-hugr-lde.md", "speckit", 56),
        ("kiro-spaceweirdos-editor.md", "kiro", 12),
        ("ccsdd-rag-backend.md", "kiro", 9),
        ("kiro-template-example.md", "kiro", 4),
        ("openspec-template.md", "kiro", 4),
        ("openspec-archive-command.md", "kiro", 29),
        ("openspec-update-workflow.md", "kiro", 15),
        ("openspec-global-install-scope.md", "kiro", 17),
        ("taskmaster-edu-parser.json", "taskmaster", 21),
        ("taskmaster-video-pipeline.json", "taskmaster", 28),
        ("taskmaster-scrumpoker.json", "taskmaster", 12),
    ],
)
def test_real_task_lists_are_detected_and_read(name: str, format: str, count: int) -> None:
    path = PLANS / name
    assert detect_format(Source.read(path)) == format
    plan = load_plan(path)
    assert (plan.format, len(plan.phases)) == (format, count)
    # none of the older Markdown readers claims them any more
    assert [r.NAME for r in OLD_MARKDOWN_READERS if r.detect(Source.read(path))] == []


# -- spec-kit ---------------------------------------------------------------------------------


def test_speckit_template_order_parallel_groups_and_sections() -> None:
    plan = load_plan(PLANS / "speckit-template.md")
    assert plan.ids[:3] == ("T001", "T002", "T003")  # "TXXX" placeholders are no tasks
    assert "TXXX" not in "".join(plan.ids)
    expected = {
        "T001": (),
        "T002": ("T001",),
        "T003": ("T002",),  # a [P] group of one after T002
        "T004": ("T003",),  # Phase 2 after all of Phase 1
        "T005": ("T004",),
        "T006": ("T004",),  # T005 and T006 [P]: one group
        "T007": ("T005", "T006"),  # the task after the group waits for all of it
        "T010": ("T009",),
        "T011": ("T009",),
        "T012": ("T010", "T011"),  # a heading ends the tests' group: implementation after it
        "T013": ("T010", "T011"),
        "T014": ("T012", "T013"),  # (depends on T012, T013)
    }
    assert {pid: deps(plan)[pid] for pid in expected} == expected
    assert plan.phase("T012").tags == ("us1", "phase-3")
    assert plan.phase("T012").files.create == ("src/models/[entity1].py",)
    assert plan.phase("T010").files.modify == ("tests/contract/test_[name].py",)
    assert plan.phase("T012").line == 92
    # the Checkpoint of a section is a prose criterion of its last task
    assert [c.criterion for c in plan.phase("T017").acceptance] == [
        "Checkpoint: At this point, User Story 1 should be fully functional and testable "
        "independently"
    ]
    assert all(c.check is None for c in plan.phase("T017").acceptance)


def test_speckit_older_layout_and_its_blocks_lines() -> None:
    plan = load_plan(PLANS / "speckit-template-2025-08.md")
    assert plan.phase("T001").tags == ("phase-3.1",)
    assert deps(plan)["T004"] == ("T003",)  # Phase 3.2 after 3.1
    assert deps(plan)["T008"] == ("T004", "T005", "T006", "T007")  # tests before the models
    # "- T008 blocks T009, T015" in its Dependencies section
    assert deps(plan)["T009"] == ("T008",)  # in T008's [P] group, but the plan orders them
    assert deps(plan)["T015"] == ("T014", "T008")


def test_speckit_done_tasks_labels_and_section_criteria() -> None:
    plan = load_plan(PLANS / "speckit-flow-kafka.md")
    assert all(phase.done for phase in plan.phases)  # [x]
    assert plan.phase("T001").line == 30
    # "Add ... to <path>": a task that opens with Add creates what it names (or finds it there)
    assert plan.phase("T003").files.create == ("backend/backend/src/core/config.py",)
    assert plan.phase("T015").files.modify == ("backend/backend/src/services/task_service.py",)
    assert deps(plan)["T004"] == ("T003",)
    assert deps(plan)["T005"] == ("T004",)
    assert plan.phase("T010").tags == ("us4", "phase-3")
    criteria = [c.criterion for c in plan.phase("T013").acceptance]
    assert criteria[0].startswith("Independent Test: Start Kafka via Docker Compose")
    assert criteria[1].startswith("Checkpoint: US4 complete")


def test_speckit_parallel_runs_write_one_file_and_are_kept_apart() -> None:
    plan = load_plan(PLANS / "speckit-aeon-observability.md")
    # T007..T012 [P] all write models.py: one group, which the scheduler serialises
    assert deps(plan)["T008"] == deps(plan)["T007"] == ("T004", "T005", "T006")
    assert any("both write 'aeon/observability/models.py'" in w for w in plan.warnings)


def test_speckit_bold_ids_and_dependencies_fields() -> None:
    plan = load_plan(PLANS / "speckit-hugr-lde.md")
    assert plan.phase("T004").name == "Contract test: start.sh interface"
    assert deps(plan)["T001"] == ()  # **Dependencies**: None (first task)
    assert deps(plan)["T016"] == ("T003", *(f"T{n:03d}" for n in range(8, 16)))  # T008-T015
    assert "T030" in deps(plan)["T026"]  # a forward reference, as the file writes it
    assert plan.phase("T004").files.modify == ("tests/lde/test-start-interface.sh",)
    assert all(not phase.done for phase in plan.phases)


def test_speckit_comments_fences_and_checklists_yield_no_tasks() -> None:
    plan = load_plan(EXAMPLES / "speckit-tasks.md")
    assert plan.ids == tuple(f"T00{n}" for n in range(1, 9))  # no T900 (comment), no fence
    assert plan.phase("T001").done and not plan.phase("T002").done
    assert deps(plan)["T005"] == ("T004",)
    checks = [c.check for c in plan.phase("T006").acceptance if c.check]
    assert checks == ["python -m pytest -q"]


def test_a_checklist_is_not_a_task_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        # Requirements checklist

        ## Validation

        - [ ] CHK001 Are acceptance criteria specific? [Clarity]
        - [x] All contracts have tests
        - [ ] Every entity has a model
        """,
    )
    with pytest.raises(PlanError) as error:
        load_plan(path)
    assert str(error.value) == f"{path}: {not_a_plan()}"
    assert "speckit (- [ ] T001 checkboxes)" in not_a_plan()
    assert "kiro (- [ ] 1.1 checkboxes)" in not_a_plan()


def test_forcing_an_old_reader_on_speckit_is_refused() -> None:
    """maestro-md used to read "## Phase 1" and "## Phase 2" as independent phases, side by side."""
    path = PLANS / "speckit-template.md"
    with pytest.raises(PlanError) as error:
        load_plan(path, format="maestro-md")
    assert str(error.value).startswith(f"{path}: not a maestro-md plan (")
    assert "it reads as speckit" in str(error.value)
    for name in ("tasklist", "superpowers", "steps", "kiro"):
        with pytest.raises(PlanError, match="it reads as speckit"):
            load_plan(path, format=name)


# -- Kiro, cc-sdd, OpenSpec -------------------------------------------------------------------


def test_kiro_groups_leaves_done_and_optional() -> None:
    plan = load_plan(PLANS / "kiro-spaceweirdos-editor.md")
    assert plan.ids[:3] == ("1.1", "1.2", "1.3")  # "1." holds sub-tasks: a group
    assert "1" not in plan.ids
    assert deps(plan)["2.1"] == ("1.3",)  # written order, one by one
    assert all(phase.done for phase in plan.phases)
    assert plan.phase("4.4").tags == ("optional",)  # - [x]*
    assert plan.phase("1.1").line == 8
    assert plan.phase("1.1").description.startswith("1. Set up API integration for weirdo editor")


def test_ccsdd_parallel_marks() -> None:
    plan = load_plan(PLANS / "ccsdd-rag-backend.md")
    assert deps(plan)["1.1"] == deps(plan)["1.3"] == ()
    assert deps(plan)["2.1"] == deps(plan)["2.3"] == ("1.1", "1.2", "1.3")
    assert deps(plan)["3.1"] == ("2.1", "2.2", "2.3")  # no (P): after the whole run
    assert deps(plan)["3.2"] == ("3.1",)
    assert plan.phase("2.1").name == "OpenAI Embeddings API Integration"


def test_ccsdd_depends_boundary_and_observable() -> None:
    plan = load_plan(EXAMPLES / "kiro-tasks.md")
    assert deps(plan) == {
        "1": (),
        "2.1": ("1",),
        "2.2": ("1",),
        "2.3": ("2.1", "2.2"),
        "2.4": ("2.3",),
        "3": ("2.3",),  # not after the optional 2.4: -m "not optional" must not block it
    }
    assert plan.phase("1").done
    check = plan.phase("2.1").acceptance[0]
    assert check.check == "python -m pytest tests/test_tokens.py -q"
    assert plan.phase("2.2").acceptance[0].check is None  # prose
    assert plan.phase("2.1").files.modify == ("wordstats/tokens.py",)
    assert "_Boundary: Tokenizer_" in plan.phase("2.1").description
    assert "2. Build the word counter" in plan.phase("2.1").description


def test_openspec_nesting_and_templates() -> None:
    plan = load_plan(PLANS / "openspec-archive-command.md")
    assert plan.ids[:4] == ("1.1.1", "1.1.2", "1.1.3", "1.1.4.1")  # real nesting, any depth
    assert deps(plan)["2.1.1"] == ("1.1.6",)
    template = load_plan(PLANS / "openspec-template.md")
    assert template.ids == ("1.1", "1.2", "2.1", "2.2")
    assert template.phase("1.1").name == "Task 1.1"  # "<!-- Task description -->"
    done = load_plan(PLANS / "openspec-update-workflow.md")
    assert all(phase.done for phase in done.phases)
    assert done.phase("1.4").files.modify == ("src/core/profiles.ts",)


def test_a_template_of_placeholders_only_is_no_plan() -> None:
    with pytest.raises(PlanError, match="no phases found in any known format"):
        load_plan(PLANS / "ccsdd-template.md")


def test_an_unknown_checkbox_mark_warns(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, "- [ ] 1. a\n- [~] 2. b\n"))
    assert [p.done for p in plan.phases] == [False, False]
    assert any("checkbox [~] is neither [ ] nor [x]" in w for w in plan.warnings)


# -- Taskmaster -------------------------------------------------------------------------------


def test_taskmaster_dotted_subtask_dependencies() -> None:
    plan = load_plan(PLANS / "taskmaster-edu-parser.json")
    assert plan.ids[:5] == ("1.1", "1.2", "1.3", "1.4", "2.1")
    assert deps(plan)["1.2"] == ("1.1",)
    assert deps(plan)["2.1"] == ("1.2", "1.3", "1.4")  # task 2 depends on group 1's last ones
    assert deps(plan)["2.5"] == ("2.2", "2.4")  # 2.3 implied through 2.4
    assert all(phase.done for phase in plan.phases)


def test_taskmaster_string_ids_sibling_numbers_and_statuses() -> None:
    plan = load_plan(PLANS / "taskmaster-video-pipeline.json")
    assert deps(plan)["1.2"] == ("1.1",)
    assert deps(plan)["2.6"] == ("2.3", "2.4", "2.5")
    # '1', '2', '3': every phase of those groups that no sibling waits for
    assert deps(plan)["5.1"] == ("1.5", "2.2", "2.6", "3.5", "3.6", "3.7")
    assert plan.phase("1.1").done and not plan.phase("4.1").done
    # priority orders ready phases when nothing else does: high before medium
    assert plan.ids.index("3.7") < plan.ids.index("4.1")


def test_taskmaster_legacy_shape() -> None:
    plan = load_plan(PLANS / "taskmaster-scrumpoker.json")
    assert deps(plan)["1.3"] == ("1.2",)  # [1, 2]: 1 implied through 2
    assert deps(plan)["2.1"] == ("1.3",)
    assert plan.phase("2.1").line is not None
    assert "Part of task 2: Setup React Frontend Project" in plan.phase("2.1").description


def test_taskmaster_tags(tmp_path: Path) -> None:
    folder = tmp_path / ".taskmaster" / "tasks"
    folder.mkdir(parents=True)
    plan_path = folder / "tasks.json"
    shutil.copy(EXAMPLES / "taskmaster-tasks.json", plan_path)
    assert load_plan(plan_path).title == "Taskmaster tasks, tag 'master'"
    (tmp_path / ".taskmaster" / "state.json").write_text(json.dumps({"currentTag": "docs"}))
    assert load_plan(plan_path).ids == ("1",)
    assert load_plan(plan_path, tag="master").ids[0] == "1"
    assert len(load_plan(plan_path, tag="master").phases) == 6
    with pytest.raises(PlanError, match=r"has no tag 'nope'; tags: master, docs"):
        load_plan(plan_path, tag="nope")


def test_taskmaster_unknown_status_warns_and_bad_shapes_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": [{"id": 1, "title": "a", "status": "someday"}]}))
    plan = load_plan(path)
    assert not plan.phase("1").done
    assert plan.warnings == (f"{path}:1: phase '1': unknown status 'someday', read as not done",)
    path.write_text('{"tasks": [\n {"id": 1, "title": "a", "subtasks": 3}\n]}')
    with pytest.raises(PlanError) as error:
        load_plan(path)
    assert str(error.value) == f"{path}:2: phase '1' 'subtasks' must be a list, not 3"


# -- examples ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "format"),
    [
        ("speckit-tasks.md", "speckit"),
        ("kiro-tasks.md", "kiro"),
        ("openspec-tasks.md", "kiro"),
        ("taskmaster-tasks.json", "taskmaster"),
    ],
)
def test_example_plans_of_the_task_list_formats(name: str, format: str) -> None:
    plan = load_plan(EXAMPLES / name)
    assert plan.format == format
    assert plan.warnings == ()
    assert any(phase.done for phase in plan.phases)


def test_taskmaster_details_and_test_strategy_go_to_the_prompt() -> None:
    plan = load_plan(EXAMPLES / "taskmaster-tasks.json")
    phase = plan.phase("3")
    assert phase.acceptance[0].criterion == "Test strategy: Run it on a sample file."
    assert phase.acceptance[0].check is None
    assert "wordstats/cli.py with argparse." in phase.description
    assert plan.ids[-1] == "4"  # low priority: last among the ready


def test_the_readers_are_registered_in_detection_order() -> None:
    from pytest_maestro.plan.formats import readers

    names = [reader.NAME for reader in readers()]
    assert names.index("taskmaster") < names.index("native")
    assert names[-2:] == [speckit.NAME, numbered.NAME]


def test_each_format_is_registered_under_its_readers_name() -> None:
    """The registry names each reader without importing it: the names must be the readers'."""
    from pytest_maestro.plan import FORMAT_NAMES
    from pytest_maestro.plan.formats import reader

    assert [reader(name).NAME for name in FORMAT_NAMES] == list(FORMAT_NAMES)


# -- a run --------------------------------------------------------------------------------------

RECORDING_RUNTIME = """
    from pytest_maestro.runtimes import AgentResult

    class Record:
        name = "record"
        autonomy = ""

        def run(self, request):
            with open(request.root / "ran.txt", "a") as ran:
                ran.write(request.phase.id + "\\n")
            for path in (*request.phase.files.create, *request.phase.files.modify):
                target = request.root / path
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "a") as out:
                    out.write(request.phase.id + "\\n")
            if request.phase.id == "2.1":  # what its Observable line runs
                (request.root / "tests").mkdir(exist_ok=True)
                (request.root / "tests" / "test_tokens.py").write_text("def test_ok(): pass\\n")
            return AgentResult("completed", "COMPLETED: recorded")

    def pytest_maestro_runtimes(config):
        return [Record()]
"""


def test_done_tasks_are_skipped_and_count_for_their_dependents(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDING_RUNTIME)
    shutil.copy(EXAMPLES / "kiro-tasks.md", pytester.path / "tasks.md")
    result = pytester.runpytest("--maestro", "tasks.md", "--maestro-runtime=record", "-rs")
    result.assert_outcomes(passed=5, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*tasks.md:5: done in the plan"])
    result.stdout.fnmatch_lines(["maestro: 6 phases in * waves: 1 done in the plan, 5 to run"])
    ran = (pytester.path / "ran.txt").read_text().split()
    assert "1" not in ran and ran.index("2.1") < ran.index("2.3") and ran[-1] in ("2.4", "3")
    # Done in the plan counts as completed: the plan is all done, in the status and the summary.
    status = pytester.runpytest("--maestro", "tasks.md", "--maestro-status=json")
    assert status.ret == 0
    summary = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    assert summary["batch_status"] == "success"
    # -m "not optional" leaves out 2.4 and holds nothing else back
    (pytester.path / "ran.txt").unlink()
    result = pytester.runpytest(
        "--maestro", "tasks.md", "--maestro-runtime=record", "--maestro-fresh", "-m", "not optional"
    )
    result.assert_outcomes(passed=4, skipped=1, deselected=1)
    assert "2.4" not in (pytester.path / "ran.txt").read_text().split()


def test_analyze_json_marks_done_tasks(pytester: pytest.Pytester) -> None:
    shutil.copy(EXAMPLES / "speckit-tasks.md", pytester.path / "tasks.md")
    result = pytester.runpytest("--maestro", "tasks.md", "--maestro-analyze=json")
    assert result.ret == pytest.ExitCode.OK
    phases = {p["id"]: p for p in json.loads(result.stdout.str())["phases"]}
    assert phases["T001"]["done"] is True
    assert "done" not in phases["T002"]


def test_forcing_an_old_format_on_a_task_list_is_one_line(pytester: pytest.Pytester) -> None:
    shutil.copy(PLANS / "speckit-template.md", pytester.path / "tasks.md")
    result = pytester.runpytest("--maestro", "tasks.md", "--maestro-format", "maestro-md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith("ERROR: tasks.md: not a maestro-md plan (")


def test_tasks_that_only_look_at_files_read_them_and_write_none(tmp_path: Path) -> None:
    plan = load_plan(PLANS / "speckit-aeon-observability.md")
    verify = plan.phase("T002")  # "Verify existing observability module structure: …"
    assert verify.files.all() == ()
    assert "aeon/observability/models.py" in verify.reads
    assert plan.phase("T004").files.modify == ("aeon/observability/helpers.py",)
    tasks = tmp_path / "tasks.md"
    tasks.write_text(
        "# Tasks\n\n- [ ] 1. Review `src/app.py` for dead code\n"
        "- [ ] 2. Fix the dead code in `src/app.py`\n"
    )
    kiro = load_plan(tasks, "kiro")
    assert (kiro.phase("1").files.all(), kiro.phase("1").reads) == ((), ("src/app.py",))
    assert (kiro.phase("2").files.modify, kiro.phase("2").reads) == (("src/app.py",), ())


def test_a_taskmaster_tag_may_be_empty_text(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps({"": {"tasks": [{"id": 1, "title": "only"}]}}))
    plan = load_plan(tasks)
    assert (plan.ids, plan.title) == (("1",), "Taskmaster tasks, tag ''")
