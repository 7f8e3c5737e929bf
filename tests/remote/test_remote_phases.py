"""Remote phases on real transports on one machine: ``--tx popen//chdir=DIR`` workers stand for
hosts whose file system is not the controller's. Real git repositories, real xdist workers."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from ..helpers import FAKES, phase

pytestmark = pytest.mark.slow

PLUGINS = Path(__file__).parent / "plugins"


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


def make_project(root: Path, phases: list[dict[str, object]]) -> Path:
    """A repository with history, an uncommitted edit, an untracked file and the plan."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "user@example.com")
    git(root, "config", "user.name", "User")
    (root / ".gitignore").write_text(".env\n")
    (root / "app.txt").write_text("app v1\n")
    (root / "old.txt").write_text("to be renamed\n" * 20)
    (root / "gone.txt").write_text("to be deleted\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    (root / "app.txt").write_text("app v1\nthe user's uncommitted edit\n")
    (root / "notes.txt").write_text("the user's untracked notes\n")
    (root / ".env").write_text("SECRET=1\n")
    (root / "plan.yaml").write_text(yaml.safe_dump({"phases": phases}, sort_keys=False))
    return root


def tree(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every file under ``root`` but git's and the state dir: kind, mode bits, content."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in (".git", ".maestro"):
            continue
        if path.is_symlink():
            found[str(relative)] = ("link", 0, os.readlink(path).encode())
        elif path.is_file():
            found[str(relative)] = ("file", stat.S_IMODE(path.stat().st_mode), path.read_bytes())
    return found


def run_env(copy_pytest: bool = False) -> dict[str, str]:
    """The environment of a run: lean, and without xdist's copy of pytest's own source to each
    worker's folder unless ``copy_pytest`` (see ``plugins/uncopied.py``)."""
    env = {**os.environ, "PYTEST_ADDOPTS": "-p no:hypothesispytest -p no:anyio --assert=plain"}
    if not copy_pytest:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS), env.get("PYTHONPATH")]))
        env["PYTEST_PLUGINS"] = "uncopied"
    return env


def run(root: Path, *options: str, copy_pytest: bool = False) -> subprocess.CompletedProcess[str]:
    """pytest on the project's plan, from its root, as users run it."""
    command = [
        *("python", "-m", "pytest", "--maestro", "plan.yaml", "-p", "no:cacheprovider"),
        *options,
    ]
    env = run_env(copy_pytest)
    return subprocess.run(command, cwd=root, capture_output=True, text=True, env=env, timeout=300)


def hosts(base: Path, count: int) -> list[str]:
    """``--tx`` options for ``count`` workers, each in a directory of its own."""
    options = []
    for n in range(count):
        home = base / f"host{n}"
        home.mkdir(parents=True)
        options += ["--tx", f"popen//chdir={home}"]
    return [*options, "-d"]


# A chain and a fan-in, every kind of change: new text and binary files, an executable, a
# symlink, an edit of the user's uncommitted work, a rename, a deletion; each dependent builds
# on its dependencies' results, which it finds only if they came back and went out again.
CHAIN = [
    phase(
        "a",
        "printf 'a1\\n' > a.txt; printf '\\000\\001\\002\\377' > blob.bin",
        "printf '#!/bin/sh\\necho tool\\n' > tool.sh; chmod +x tool.sh; ln -s a.txt link",
        files={"create": ["a.txt", "blob.bin", "tool.sh", "link"]},
        acceptance=[{"criterion": "runs in its root", "check": 'test "$MAESTRO_ROOT" = "$PWD"'}],
    ),
    phase(
        "b",
        "cat a.txt > b.txt; ./tool.sh >> b.txt; echo 'b edits' >> app.txt",
        "mv old.txt new.txt; rm gone.txt",
        files={
            "create": ["b.txt", "new.txt"],
            "modify": ["app.txt"],
            "delete": ["old.txt", "gone.txt"],
        },
        blocked_by=["a"],
    ),
    phase(
        "c",
        "cat a.txt blob.bin > c.bin",
        files={"create": ["c.bin"]},
        blocked_by=["a"],
    ),
    phase(
        "d",
        "cat b.txt c.bin new.txt > d.txt; test ! -e gone.txt",
        files={"create": ["d.txt"]},
        blocked_by=["b", "c"],
    ),
]


def test_a_plan_run_remote_leaves_the_tree_a_local_isolated_run_leaves(tmp_path: Path) -> None:
    local = make_project(tmp_path / "local", CHAIN)
    remote = make_project(tmp_path / "remote", CHAIN)
    head = git(remote, "rev-parse", "HEAD")
    index = git(remote, "ls-files", "-s")

    alone = run(local, "--maestro-isolate=worktree")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    far = run(remote, *hosts(tmp_path, 2), copy_pytest=True)  # as users' runs copy it
    assert far.returncode == 0, far.stdout + far.stderr
    assert "4 passed" in far.stdout

    assert tree(remote) == tree(local)
    made = b"a1\ntool\na1\n\x00\x01\x02\xff" + b"to be renamed\n" * 20
    assert (remote / "d.txt").read_bytes() == made
    # The user's branch and index are as they were; the run left no refs and no worktree.
    assert git(remote, "rev-parse", "HEAD") == head
    assert git(remote, "ls-files", "-s") == index
    assert git(remote, "for-each-ref", "refs/maestro/") == ""
    assert git(remote, "worktree", "list").count("\n") == 1
    # Each phase ran on a host, its log came back; the hosts that ran phases hold their work.
    logs = remote / ".maestro" / "logs"
    for pid in "abcd":
        text = (logs / f"{pid}.log").read_text()
        assert "=== attempt 1 ===" in text and "--- merged back:" in text
    used = [home for home in tmp_path.glob("host*") if (home / ".maestro-remote").is_dir()]
    assert used


def test_a_failed_remote_phase_s_work_is_kept_and_the_user_s_tree_untouched(
    tmp_path: Path,
) -> None:
    plan = [
        phase(
            "a",
            "echo half > a.txt; echo 'b edits' >> app.txt",
            files={"create": ["a.txt"], "modify": ["app.txt"]},
            acceptance=[{"criterion": "never", "check": "false"}],
            max_retries=0,
        )
    ]
    root = make_project(tmp_path / "p", plan)
    before = tree(root)
    result = run(root, *hosts(tmp_path, 1))
    assert result.returncode == 1, result.stdout + result.stderr
    assert tree(root) == before
    [kept] = git(root, "for-each-ref", "--format=%(refname)", "refs/maestro/").split()
    assert "/kept/a-" in kept
    assert "echo half" not in git(root, "show", kept, "--", "a.txt")
    assert git(root, "show", f"{kept}:a.txt") == "half\n"
    assert kept in result.stdout
    patches = list((root / ".maestro" / "kept").glob("a-*.patch"))
    assert len(patches) == 1


def test_a_diff_over_the_bound_stays_on_the_worker_and_is_named(tmp_path: Path) -> None:
    big = "head -c 100000 /dev/zero | tr '\\0' x > big.txt"
    plan = [phase("a", big, files={"create": ["big.txt"]})]
    root = make_project(tmp_path / "p", plan)
    before = tree(root)
    result = run(root, *hosts(tmp_path, 1), "--maestro-remote-diff-limit=0.01")
    assert result.returncode == 1, result.stdout + result.stderr
    assert tree(root) == before
    [patch] = (tmp_path / "host0").rglob("results/a.patch")
    assert b"+" + b"x" * 1000 in patch.read_bytes()
    assert "larger than a report carries" in result.stdout
    assert str(patch) in result.stdout.replace("\n", "")


def test_a_conflict_with_the_user_s_edit_during_the_run_keeps_the_phase_s_work(
    tmp_path: Path,
) -> None:
    plan = [
        phase(
            "a",
            "echo 'a edits' >> app.txt; sleep 2",
            files={"modify": ["app.txt"]},
        )
    ]
    root = make_project(tmp_path / "p", plan)
    home = tmp_path / "host0"
    home.mkdir()
    env = run_env()
    command = [
        *("python", "-m", "pytest", "--maestro", "plan.yaml", "-p", "no:cacheprovider"),
        *("--tx", f"popen//chdir={home}", "-d"),
    ]
    running = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True, env=env)
    session = root / ".maestro"
    for _ in range(600):  # the phase is under way once its start is in the session
        if any("in_progress" in p.read_text() for p in session.glob("*.journal")):
            break
        subprocess.run(["sleep", "0.05"], check=True)
    (root / "app.txt").write_text("the user's edit during the run\n")
    out, _ = running.communicate(timeout=300)
    assert running.returncode == 1, out
    assert (root / "app.txt").read_text() == "the user's edit during the run\n"
    assert "conflicts with the user's edits during the run: app.txt" in out
    [kept] = git(root, "for-each-ref", "--format=%(refname)", "refs/maestro/").split()
    assert "a edits" in git(root, "show", f"{kept}:app.txt")


def test_an_argument_no_remote_worker_can_be_given_is_one_line(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", [phase("a", "true")])
    result = run(root, *hosts(tmp_path, 1), "--junit-prefix", "plan.yaml")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [
        "ERROR: argument 'plan.yaml' after --junit-prefix names a path on this machine, "
        "which a worker on another (--tx) cannot be given: write "
        "--junit-prefix=plan.yaml if it is the option's value"
    ]


def test_node_ids_select_phases_on_remote_workers(tmp_path: Path) -> None:
    plan = [
        phase("a", "echo a > a.txt", files={"create": ["a.txt"]}),
        phase("b", "echo b > b.txt", files={"create": ["b.txt"]}),
    ]
    root = make_project(tmp_path / "p", plan)
    result = run(root, *hosts(tmp_path, 2), "plan.yaml::b")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert (root / "b.txt").read_text() == "b\n"
    assert not (root / "a.txt").exists()


def test_a_remote_agent_phase_gets_its_agent_and_its_dependencies_results_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    plan = [
        {
            "id": "first",
            "name": "Phase first",
            "description": "do it",
            "reads": ["R"],
            "agent": "coder",
        },
        {
            "id": "second",
            "name": "Phase second",
            "description": "then this",
            "reads": ["R"],
            "blocked_by": ["first"],
        },
    ]
    root = make_project(tmp_path / "p", plan)
    (root / "agents").mkdir()  # a definition of this machine's: it goes with the phases
    coder = "---\nname: coder\nruntime: claude\n---\nYou are the coder of this project.\n"
    (root / "agents" / "coder.md").write_text(coder)
    result = run(root, *hosts(tmp_path, 2), "--maestro-runtime=claude")
    assert result.returncode == 0, result.stdout + result.stderr
    logs = root / ".maestro" / "logs"
    # The worker has no session file: what the prompt says came in the phase's start.
    [prompt] = sorted(logs.glob("second.attempt-*.prompt.md"))
    assert "## Dependency results\n### first: Phase first\nCOMPLETED: done" in prompt.read_text()
    assert "went without" not in result.stdout + (logs / "second.log").read_text()
    [first] = sorted(logs.glob("first.attempt-*.prompt.md"))
    assert "You are the coder of this project." in first.read_text()


def test_a_worker_lost_mid_phase_loses_nothing_and_the_run_completes_on_the_others(
    tmp_path: Path,
) -> None:
    lose_a_host(tmp_path, hosts(tmp_path, 2))


def lose_a_host(tmp_path: Path, workers: list[str]) -> None:
    """A dependent plan run on ``workers`` (``--tx`` options), the first phase's host lost under
    it the first time (its worker killed) after half its work: nothing of that half reaches the
    tree, and the phase runs again on another worker."""
    mark = tmp_path / "lost-once"
    lose = f"if [ ! -e {mark} ]; then touch {mark}; echo half > a.txt; kill -9 $PPID; sleep 5; fi"
    plan = [
        phase("a", lose, "echo a > a.txt", files={"create": ["a.txt"]}),
        phase("b", "cat a.txt > b.txt", files={"create": ["b.txt"]}, blocked_by=["a"]),
    ]
    root = make_project(tmp_path / "p", plan)
    before = tree(root)
    result = run(root, *workers)
    assert result.returncode == 0, result.stdout + result.stderr
    assert mark.exists()
    assert "2 passed, 1 lost" in result.stdout
    assert "its worker gw" in result.stdout and "was lost mid-phase" in result.stdout
    after = tree(root)
    assert after.pop("a.txt")[2] == after.pop("b.txt")[2] == b"a\n"  # not the lost half
    assert after == before
