"""What a phase needs of a worker, and what a worker finds it has: the same runtimes named on
both sides, the programs looked for on the PATH (here a stand-in ``which``)."""

from __future__ import annotations

from pathlib import Path

from pytest_maestro.plan import load_graph
from pytest_maestro.run.resolver import Resolver
from pytest_maestro.run.tools import detect, needs
from pytest_maestro.runtimes import BUILTIN_RUNTIMES
from pytest_maestro.settings import Settings

PLAN = """\
phases:
- {id: cmd, name: Cmd, run: ["true"]}
- {id: agent, name: Agent, description: do it, reads: [R], agent: coder}
- {id: own, name: Own, description: do it, reads: [R], agent: tool}
- {id: rev, name: Rev, description: do it, reads: [R], agent: coder, review: spec}
"""


def resolver(tmp_path: Path) -> Resolver:
    (tmp_path / "plan.yaml").write_text(PLAN)
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "coder.md").write_text("---\nname: coder\nruntime: claude\n---\nCode.\n")
    (agents / "tool.md").write_text(
        "---\nname: tool\nruntime: command\ncommand: [mytool, '{prompt_file}']\n---\nGo.\n"
    )
    (agents / "reviewer.md").write_text("---\nname: reviewer\nruntime: codex\n---\nJudge.\n")
    graph = load_graph(tmp_path / "plan.yaml", None, None)
    settings = Settings.from_config(_Config(tmp_path / "plan.yaml"), env={})
    runtimes = {runtime.name: runtime for runtime in BUILTIN_RUNTIMES}
    return Resolver(settings, graph, tmp_path, [agents], runtimes)


class _Config:
    def __init__(self, plan: Path) -> None:
        self.plan = plan

    def getoption(self, name: str) -> object:
        return str(self.plan) if name == "maestro" else (False if name == "maestro_fresh" else None)

    def getini(self, name: str) -> object:
        return ""


def test_a_phase_needs_its_runtime_its_reviewer_s_and_git_when_isolated(tmp_path: Path) -> None:
    resolve = resolver(tmp_path)
    phase = resolve.plan.phase
    assert needs(resolve, phase("cmd"), isolated=False) == {"shell"}
    assert needs(resolve, phase("agent"), isolated=True) == {"claude", "git"}
    assert needs(resolve, phase("rev"), isolated=False) == {"claude", "codex"}


def test_a_worker_has_what_its_path_has_of_the_selected_phases_programs(tmp_path: Path) -> None:
    resolve = resolver(tmp_path)
    phases = [resolve.plan.phase(name) for name in ("cmd", "agent", "own", "rev")]
    found = detect(resolve, phases, False, "gw3", tmp_path, {"bash", "claude", "git"}.__contains__)
    assert found.worker == "gw3" and found.rootdir == str(tmp_path)
    assert found.has == {"shell", "claude", "git"}
    assert dict(found.lacks) == {
        "command": "no mytool on its PATH",
        "codex": "no codex on its PATH",
    }
    bare = detect(resolve, phases[:1], False, "gw0", tmp_path, lambda name: False)
    assert bare.has == frozenset()
    assert dict(bare.lacks) == {"shell": "no bash on its PATH", "git": "no git on its PATH"}
