"""The example plans of each LLM format, run end to end on agent CLIs that write working code.

``pytest --maestro example_plans/<plan> --maestro-runtime=<cli> --maestro-autonomous -n 2`` in a
copy of the plan's starting project (tests/fixtures/projects/<plan stem>), with the fake CLIs of
tests/fakes first on PATH. No ``FAKE:`` marker is added to the plans: the fakes act as coding
agents do, writing each file the prompt declares from tests/fixtures/solutions/<plan stem> (see
FAKE_AGENT_SOLUTIONS in tests/fakes/_fake_agent.py). The plans' own acceptance commands (pytest,
unittest, ``python -c`` imports) then judge that code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.state import read_session

from ..helpers import FAKES, FIXTURES, REPO, git_repo


@dataclass(frozen=True)
class Example:
    plan: str  # in example_plans/
    cli: str
    graph: dict[str, tuple[str, ...]]  # phase: what it is blocked by, as the plan says
    agents: dict[str, str] | None = None  # phase: the agent the plan names (else the CLI plays)
    # A command the plan gives with its expected first line of output, but as no acceptance check.
    afterwards: tuple[str, str] | None = None

    @property
    def stem(self) -> str:
        return Path(self.plan).stem


MAESTRO = {"1": (), "2": ("1",), "3": ("1",), "4": ("2", "3"), "5": ("3",)}
MAESTRO_AGENTS = {"1": "builder", "2": "builder", "3": "builder", "4": "tester", "5": "writer"}
DESIGN = {"0": (), "1": ("0",), "2": ("0",), "3": ("1", "2")}
SUPERPOWERS = {"task-1": (), "task-2": ("task-1",), "task-3": ("task-2",), "task-4": ("task-3",)}
EXAMPLES = [
    Example("maestro-plan.md", "claude", MAESTRO, MAESTRO_AGENTS),
    Example("design-plan.json", "codex", DESIGN),
    Example(
        "superpowers-plan.md",
        "gemini",
        SUPERPOWERS,
        afterwards=("python -m report --format csv fixtures/sales.json", "name,total"),
    ),
    Example("maestro-plan.md", "opencode", MAESTRO, MAESTRO_AGENTS),
    Example("design-plan.json", "copilot", DESIGN),
]


def files(root: Path) -> dict[str, bytes]:
    """Every file under root by its relative path, but a phase's own solutions (``@<phase>/``)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.relative_to(root).as_posix().startswith("@")
    }


def own_agents(names: set[str], where: Path) -> None:
    """The repository's agent definitions without their ``runtime: shell`` line, so that the
    role (and its instructions) stays and ``--maestro-runtime`` picks the CLI."""
    where.mkdir()
    for name in names:
        text = (REPO / "agents" / f"{name}.md").read_text()
        lines = [line for line in text.splitlines(keepends=True) if not line.startswith("runtime:")]
        assert len(lines) == len(text.splitlines()) - 1, f"{name}.md names no runtime"
        (where / f"{name}.md").write_text("".join(lines))


def calls(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"{e.stem}-{e.cli}")
def test_an_example_plan_runs_end_to_end_on_an_agent_cli(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, example: Example
) -> None:
    root = pytester.path
    start = FIXTURES / "projects" / example.stem
    solutions = FIXTURES / "solutions" / example.stem
    shutil.copytree(start, root, dirs_exist_ok=True)
    shutil.copy(REPO / "example_plans" / example.plan, root / example.plan)
    if example.agents:
        own_agents(set(example.agents.values()), root / "agents")
    state = root / "fake-state"
    # The checks run `python`/`python3`: this interpreter's, with pytest, whatever PATH holds.
    path = os.pathsep.join([str(FAKES), str(Path(sys.executable).parent), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_AGENT_STATE", str(state))
    monkeypatch.setenv("FAKE_AGENT_SOLUTIONS", str(solutions))

    result = pytester.runpytest_subprocess(
        "--maestro", example.plan, f"--maestro-runtime={example.cli}", "--maestro-autonomous",
        "-n", "2",
    )  # fmt: skip

    result.assert_outcomes(passed=len(example.graph))
    # Each phase was one call of the CLI, right the first time, after all its dependencies'.
    made = calls(state)
    assert sorted(c["phase_id"] for c in made) == sorted(example.graph)
    assert {(c["cli"], c["attempt"], c["cwd"]) for c in made} == {(example.cli, 1, str(root))}
    order = [c["phase_id"] for c in made]
    for phase, blockers in example.graph.items():
        assert all(order.index(b) < order.index(phase) for b in blockers), (phase, order)

    [snapshot] = (root / ".maestro").glob(f"{example.stem}-*.md")
    session = read_session(snapshot)
    assert set(session.phases) == set(example.graph)
    reported: set[str] = set()
    for phase, blockers in example.graph.items():
        done = session.phases[phase]
        assert done.status.value == "completed", phase
        assert done.result is not None and done.result.startswith("COMPLETED: wrote "), phase
        assert done.tokens.input > 0 and done.tokens.output > 0, phase
        for blocker in blockers:  # finished before the phase began, not only started
            finished, began = session.phases[blocker].completed, done.started
            assert finished is not None and began is not None
            assert datetime.fromisoformat(finished) <= datetime.fromisoformat(began), phase
        reported.update(done.files_created, done.files_modified)
        agent = (example.agents or {}).get(phase, example.cli)
        assert done.agents == (agent,), phase
        [prompt] = (root / ".maestro" / "logs").glob(f"{phase}.attempt-*.prompt.md")
        assert prompt.read_text().startswith(f"Agent: {agent}\n"), phase
        if example.agents:  # the role's instructions from its file
            role = (root / "agents" / f"{agent}.md").read_text().split("---\n")[2]
            assert role.strip() in prompt.read_text(), phase

    # The project is the starting one with every solution file in place, byte for byte, and
    # each of them is one the agents' reports name.
    built, solved = files(root), files(solutions)
    expected = {**files(start), **solved}
    assert {name: built.get(name) for name in expected} == expected
    assert reported == set(solved)
    if example.afterwards:
        command, first_line = example.afterwards
        ran = subprocess.run(
            command, shell=True, cwd=root, capture_output=True, text=True, check=True
        )
        assert ran.stdout.splitlines()[0] == first_line


def test_parallel_phases_are_not_blamed_for_each_other_s_files(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two independent phases, each writing only its declared file; one agent is slower, so the
    other's write falls within its call."""
    root = git_repo(pytester.path)
    # Not the agents': the fakes' records, and the output and basetemp of the run below.
    (root / ".gitignore").write_text("fake-state/\nstdout\nstderr\nrunpytest-*/\n")
    phases = [
        {"id": "slow", "description": "FAKE:SLEEP=2", "files": {"create": ["slow.txt"]}},
        {"id": "fast", "description": "FAKE:SLEEP=0", "files": {"create": ["fast.txt"]}},
    ]
    for phase in phases:
        phase.update(name=phase["id"], max_retries=0)
        phase["description"] += f"\nFAKE:EDIT {phase['id']}.txt=done"
        phase["acceptance"] = [{"criterion": "written", "check": f"test -s {phase['id']}.txt"}]
    (root / "plan.yaml").write_text(json.dumps({"phases": phases}))  # JSON is YAML
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT_STATE", str(root / "fake-state"))

    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-autonomous",
        "--maestro-strict-files", "-n", "2",
    )  # fmt: skip

    assert [c["phase_id"] for c in calls(root / "fake-state")].count("slow") == 1
    assert "outside its declared ones" not in result.stdout.str()
    result.assert_outcomes(passed=2)


def test_the_superpowers_example_under_review_shows_each_criterions_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--maestro-review`` on a plan in another project's format: a reviewer (here the fake
    gemini, read-only) judges each phase once, and every phase comes out ``reviewed``, its
    verdict (and any prose criterion's) in JUnit."""
    example = next(e for e in EXAMPLES if e.plan == "superpowers-plan.md")
    root = pytester.path
    shutil.copytree(FIXTURES / "projects" / example.stem, root, dirs_exist_ok=True)
    shutil.copy(REPO / "example_plans" / example.plan, root / example.plan)
    path = os.pathsep.join([str(FAKES), str(Path(sys.executable).parent), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_AGENT_STATE", str(root.parent / "fake-state"))
    monkeypatch.setenv("FAKE_AGENT_SOLUTIONS", str(FIXTURES / "solutions" / example.stem))
    result = pytester.runpytest_subprocess(
        "--maestro", example.plan, f"--maestro-runtime={example.cli}", "--maestro-autonomous",
        "--maestro-review=spec", "--junitxml=out.xml", "-n", "2",
    )  # fmt: skip
    result.assert_outcomes(passed=len(example.graph))
    tree = ET.parse(root / "out.xml")
    props = {p.get("name", ""): p.get("value", "") for p in tree.iter("property")}
    for phase in example.graph:  # under xdist, JUnit keeps the properties on the suite
        assert props[f"maestro.{phase}.review"].startswith("passed"), props
        assert props[f"maestro.{phase}.reviewed"] == "True", props
        verdicts = [v for k, v in props.items() if k.startswith(f"maestro.{phase}.criterion.")]
        assert all(v.startswith("met") for v in verdicts), verdicts
    reviews = [c for c in calls(root.parent / "fake-state") if c.get("review")]
    assert len(reviews) == len(example.graph)


# The spec-kit example's project, as its tasks find it (T001 is marked done: its package is
# there), and what a coding agent writes for each task's declared files: T008 adds type hints to
# the counting T005 wrote.
SPECKIT_START = {
    "wordstats/__init__.py": '"""Word statistics."""\n',
    "pyproject.toml": '[project]\nname = "wordstats"\nversion = "0.1.0"\n',
    "README.md": "# wordstats\n",
}
COUNT = """from collections import Counter


def top_words(text, n=10):
    return Counter(text.lower().split()).most_common(n)
"""
SPECKIT_SOLUTIONS = {
    "pyproject.toml": SPECKIT_START["pyproject.toml"] + "\n[tool.ruff]\nline-length = 100\n",
    "tests/test_smoke.py": "import wordstats\n\n\ndef test_imports():\n    assert wordstats\n",
    "tests/test_count.py": (
        "from wordstats.count import top_words\n\n\n"
        "def test_counts():\n"
        '    assert top_words("a b a", 1) == [("a", 2)]\n'
    ),
    "@T005/wordstats/count.py": COUNT,
    "wordstats/count.py": COUNT.replace(
        "(text, n=10)", "(text: str, n: int = 10) -> list[tuple[str, int]]"
    ),
    "wordstats/cli.py": (
        "import sys\n\nfrom wordstats.count import top_words\n\n\n"
        "def main() -> None:\n"
        "    with open(sys.argv[1]) as handle:\n"
        "        for word, count in top_words(handle.read()):\n"
        '            print(f"{word} {count}")\n\n\n'
        'if __name__ == "__main__":\n    main()\n'
    ),
    "README.md": "# wordstats\n\n`python -m wordstats.cli FILE` prints the ten commonest words.\n",
}
SPECKIT = {
    "T002": ("T001",), "T003": ("T001",), "T004": ("T002", "T003"), "T005": ("T004",),
    "T006": ("T005",), "T007": ("T006",), "T008": ("T006",),
}  # fmt: skip


def test_the_speckit_example_under_review_fails_a_missed_criterion_then_passes_a_resumed_round(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--maestro-review`` on spec-kit's tasks.md as the example has it: each task's prose
    criteria (a checkpoint, a story's independent test) judged one by one, in JUnit and the
    report; T006's implementer misses its independent test (the fake codex reviewer says so until
    a fix round), the finding fails the attempt, the round resumes the implementer's session,
    and the phase passes."""
    root = pytester.path
    solutions = root.parent / "solutions"
    for where, files_ in ((root, SPECKIT_START), (solutions, SPECKIT_SOLUTIONS)):
        for name, text in files_.items():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            (where / name).write_text(text)
    shutil.copy(REPO / "example_plans" / "speckit-tasks.md", root / "tasks.md")
    state = root.parent / "fake-state"
    path = os.pathsep.join([str(FAKES), str(Path(sys.executable).parent), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_AGENT_STATE", str(state))
    monkeypatch.setenv("FAKE_AGENT_SOLUTIONS", str(solutions))
    monkeypatch.setenv("FAKE_REVIEW_UNMET_UNTIL_ROUND", "T006=1")

    result = pytester.runpytest_subprocess(
        "--maestro", "tasks.md", "--maestro-runtime=codex", "--maestro-autonomous",
        "--maestro-review=spec", "--junitxml=out.xml", "--maestro-report=report.md", "-n", "2",
    )  # fmt: skip

    result.assert_outcomes(passed=len(SPECKIT), skipped=1)  # T001 is done in the plan
    tree = ET.parse(root / "out.xml")
    props = {p.get("name", ""): p.get("value", "") for p in tree.iter("property")}
    for phase in SPECKIT:
        assert props[f"maestro.{phase}.reviewed"] == "True", (phase, props)
    # The prose criteria, each with the reviewer's verdict; a criterion a command checks is not
    # the reviewer's (T006's `python -m pytest -q` ran, and passed).
    verdicts = {k: v for k, v in props.items() if ".criterion." in k}
    assert verdicts == {
        "maestro.T003.criterion.1": 'met: Checkpoint: `python -c "import wordstats"` works '
        "(tests/test_smoke.py:1)",
        "maestro.T006.criterion.1": "met: Independent Test: Run the CLI on a small text and "
        "read the counts (wordstats/cli.py:1)",
    }
    assert props["maestro.T006.review"] == "passed after 1 fix round, 1/1 criteria met"
    assert props["maestro.T005.review"] == "passed, no findings"  # no prose criterion
    # T006: missed the criterion, failed with the finding, fixed in its own session, passed.
    made = [c for c in calls(state) if c["phase_id"] == "T006"]
    assert [(c["review"], c["round"]) for c in made] == [
        (False, 0), (True, 0), (False, 1), (True, 1),
    ]  # fmt: skip
    logs = root / ".maestro" / "logs"
    thread = json.loads((logs / "T006.attempt-1.reply").read_text().splitlines()[0])["thread_id"]
    fix = made[2]["argv"]
    assert fix[fix.index("resume") + 1] == thread
    log = (logs / "T006.log").read_text()
    missed = (
        "criterion 1 not met: Independent Test: Run the CLI on a small text and read the counts"
        " (nothing in the change does it)"
    )
    assert "--- review by reviewer (codex), spec: failed, 0/1 criteria met" in log
    assert f"---     {missed}" in log
    assert missed in (logs / "T006.attempt-1.round-1.prompt.md").read_text()
    report = (root / "report.md").read_text()
    assert "- fix round 1 (resumes session " in report
    assert "Independent Test: Run the CLI on a small text and read the counts" in report
    # The code the tasks built works.
    ran = subprocess.run(
        [sys.executable, "-m", "wordstats.cli", "README.md"], cwd=root, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert ran.stdout.splitlines()[0].split()[1].isdigit()
