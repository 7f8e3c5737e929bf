"""--maestro-isolate=worktree on real git repositories: the user's branch, index, uncommitted
edits and untracked files are out of a phase's reach; results come back, the rest is kept."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ..helpers import FAKES, phase, write_plan

ISOLATE = "--maestro-isolate=worktree"


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


def init_repo(root: Path) -> None:
    """A repository with a commit, a staged change, an uncommitted edit and an untracked file."""
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "user@example.com")
    git(root, "config", "user.name", "User")
    (root / ".gitignore").write_text(".env\n")
    (root / "app.txt").write_text("app v1\n")
    (root / "staged.txt").write_text("staged v1\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    git(root, "branch", "develop")
    (root / "staged.txt").write_text("staged v2\n")
    git(root, "add", "staged.txt")
    (root / "app.txt").write_text("app v1\nthe user's uncommitted edit\n")
    (root / "notes.txt").write_text("the user's untracked notes\n")
    (root / ".env").write_text("SECRET=1\n")


def user_state(root: Path) -> dict[str, str]:
    """Everything of the user's that a phase must not change."""
    return {
        "branch": git(root, "symbolic-ref", "HEAD"),
        "branches": git(root, "for-each-ref", "refs/heads/"),
        "head": git(root, "rev-parse", "HEAD"),
        "index": git(root, "ls-files", "-s"),
        "staged": git(root, "diff", "--cached"),
        "stash": git(root, "stash", "list"),
        "app.txt": (root / "app.txt").read_text(),
        "staged.txt": (root / "staged.txt").read_text(),
        "notes.txt": (root / "notes.txt").read_text(),
        ".env": (root / ".env").read_text(),
    }


def worktrees(root: Path) -> list[str]:
    return [
        line.split(" ", 1)[1]
        for line in git(root, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def kept_refs(root: Path) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname)", "refs/maestro/").split()


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    init_repo(pytester.path)
    return pytester.path


def test_refused_outside_a_git_work_tree(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [
        f"ERROR: --maestro-isolate=worktree needs a git work tree, and the project root "
        f"{pytester.path} is not in one"
    ]


def test_a_base_that_cannot_be_made_is_one_line_and_leaves_the_session_free(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(pytester, [phase("a", "echo a > a.txt", files={"create": ["a.txt"]})])
    index = repo / ".git" / "index"
    good = index.read_bytes()
    index.write_bytes(b"not an index")
    refreshers = {t for t in threading.enumerate() if t.name == "maestro-snapshot"}
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    [error] = [line for line in result.errlines if line.strip()]
    assert error.startswith(f"ERROR: cannot snapshot the work tree {repo}: git ")
    assert error.endswith("index file smaller than expected")
    assert {t for t in threading.enumerate() if t.name == "maestro-snapshot"} <= refreshers
    index.write_bytes(good)
    again = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    again.assert_outcomes(passed=1)  # not "already running": the failed run let the plan go
    assert (repo / "a.txt").read_text() == "a\n"


def test_a_bad_isolate_value_is_one_line(repo: Path, pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    result = pytester.runpytest("--maestro", "plan.yaml", "-p", "no:cacheprovider")
    assert result.ret == 0  # the control: the same run without the bad value passes
    bad = pytester.runpytest("--maestro", "plan.yaml", "--maestro-isolate=branch")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "invalid choice: 'branch'" in bad.stderr.str()


# What an agent may do in its worktree that would wreck the user's checkout if it ran there, and
# whether the phase still passes: a phase whose result changes undeclared files fails.
VANDALS = {
    "reset": (["echo made > made.txt", "git reset -q --hard main"], False),
    "clean": (["git clean -fdxq", "echo made > made.txt"], True),
    "stash": (["echo junk >> app.txt", "git stash -q -u", "echo made > made.txt"], True),
    "commit": (["echo made > made.txt", "git add -A", "git commit -qm agent --no-verify"], True),
    "index": (
        ["git checkout -q --detach HEAD", "git rm -q --cached app.txt", "echo made > made.txt"],
        True,
    ),
    "other-branch": (
        ["git checkout -q develop", "echo made > made.txt", "git add -A", "git commit -qm agent"],
        False,
    ),
    "write-outside": (["echo clobbered > app.txt", "rm notes.txt", "echo made > made.txt"], False),
}


@pytest.mark.parametrize("action", sorted(VANDALS))
def test_an_agent_in_its_worktree_cannot_touch_the_users_work(
    repo: Path, pytester: pytest.Pytester, action: str
) -> None:
    commands, passes = VANDALS[action]
    write_plan(
        pytester,
        [phase("vandal", *commands, files={"create": ["made.txt"]}, max_retries=0)],
    )
    git(repo, "add", "plan.yaml")  # the plan is part of the user's staged work
    before = user_state(repo)
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    assert user_state(repo) == before
    assert worktrees(repo) == [str(repo)]
    if passes:
        result.assert_outcomes(passed=1)
        assert (repo / "made.txt").read_text() == "made\n"
        assert git(repo, "status", "--porcelain", "made.txt") == "?? made.txt\n"
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["*failed*changed files outside its declared ones: *app.txt*notes.txt*"]
        )
        assert not (repo / "made.txt").exists()
        assert any("/kept/vandal-" in ref for ref in kept_refs(repo))


def test_a_change_outside_the_declared_files_fails_the_attempt_which_can_retry(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(
        pytester,
        [
            phase(
                "strays",
                'if [ "$MAESTRO_ATTEMPT" = 1 ]; then echo stray >> app.txt; fi',
                'if [ "$MAESTRO_ATTEMPT" = 2 ]; then git checkout -q -- app.txt; fi',
                "echo made > made.txt",
                files={"create": ["made.txt"]},
                max_retries=1,
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    retried = "*strays: attempt 2 of 2 *: changed files outside its declared ones: app.txt"
    result.stdout.fnmatch_lines([retried])
    assert (repo / "made.txt").read_text() == "made\n"
    assert (repo / "app.txt").read_text() == "app v1\nthe user's uncommitted edit\n"


def test_dependents_see_merged_results_and_every_phase_sees_the_users_edits(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(
        pytester,
        [
            phase("a", "cat app.txt notes.txt > a.txt", files={"create": ["a.txt"]}),
            phase("b", "cat a.txt > b.txt", files={"create": ["b.txt"]}, blocked_by=["a"]),
            phase(
                "c",
                "cat b.txt staged.txt > c.txt",
                files={"create": ["c.txt"]},
                blocked_by=["b"],
            ),
            phase("d", "cat notes.txt > d.txt", files={"create": ["d.txt"]}),
        ],
    )
    before = user_state(repo)
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    users = "app v1\nthe user's uncommitted edit\nthe user's untracked notes\n"
    assert (repo / "a.txt").read_text() == users
    assert (repo / "b.txt").read_text() == users
    assert (repo / "c.txt").read_text() == users + "staged v2\n"
    assert (repo / "d.txt").read_text() == "the user's untracked notes\n"
    assert user_state(repo) == before
    assert worktrees(repo) == [str(repo)]
    assert kept_refs(repo) == []  # nothing failed: nothing kept, the run's own refs gone


def test_phases_run_in_their_worktree_and_log_in_the_state_dir(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(
        pytester,
        [
            phase(
                "where",
                'echo "$MAESTRO_ROOT $MAESTRO_PROJECT_ROOT $PWD" > where.txt',
                files={"create": ["where.txt"]},
                acceptance=[{"criterion": "runs beside", "check": 'test "$PWD" = "$MAESTRO_ROOT"'}],
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    root, project, cwd = (repo / "where.txt").read_text().split()
    assert project == str(repo)
    assert root == cwd and Path(root).is_relative_to(repo / ".maestro" / "worktrees")
    assert not Path(root).exists()  # removed when the phase ended
    log = (repo / ".maestro" / "logs" / "where.log").read_text()
    assert "--- worktree " in log and "--- merged back: where.txt" in log


def test_a_failed_phase_s_work_is_kept_and_named_in_the_report(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(
        pytester,
        [
            phase(
                "broken",
                "echo half done > part.txt",
                files={"create": ["part.txt"]},
                acceptance=[{"criterion": "never", "check": "false"}],
                max_retries=0,
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert not (repo / "part.txt").exists()  # a failed phase brings nothing back
    [ref] = kept_refs(repo)
    result.stdout.fnmatch_lines([f"*its work is kept as {ref} and .maestro/kept/broken-*.patch"])
    assert git(repo, "show", f"{ref}:part.txt") == "half done\n"
    [patch] = (repo / ".maestro" / "kept").glob("broken-*.patch")
    git(repo, "apply", "--check", str(patch))  # applies to the user's tree as it is
    assert worktrees(repo) == [str(repo)]


def test_a_merge_back_error_keeps_the_phase_s_work_and_names_it(
    repo: Path, pytester: pytest.Pytester
) -> None:
    # The user makes "out" a file during the run: the phase's out/new.txt cannot be written.
    write_plan(
        pytester,
        [
            phase(
                "blocked-write",
                'echo "the user\'s file" > "$MAESTRO_PROJECT_ROOT/out"',
                "mkdir -p out && echo made > out/new.txt",
                files={"create": ["out/new.txt"]},
                max_retries=0,
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert (repo / "out").read_text() == "the user's file\n"
    [ref] = [ref for ref in kept_refs(repo) if "/kept/" in ref]
    result.stdout.fnmatch_lines(["*not merged back: *Not a directory*"])
    result.stdout.fnmatch_lines([f"*its work is kept as {ref} and .maestro/kept/blocked-write-*"])
    assert git(repo, "show", f"{ref}:out/new.txt") == "made\n"
    assert worktrees(repo) == [str(repo)]


def test_a_phase_s_pre_images_go_when_it_ends(repo: Path, pytester: pytest.Pytester) -> None:
    preimages = repo / ".maestro" / "preimages"
    preimages.mkdir(parents=True)
    session = "plan-" + hashlib.sha256(b"plan.yaml").hexdigest()[:8]  # its files are named so
    (preimages / f"{session}.fresh.tar").write_bytes(b"an earlier run's: not to be put back")
    write_plan(
        pytester,
        [
            phase(  # its pre-image is saved while it runs
                "edits",
                f"test -e {preimages}/{session}.edits.tar",
                "echo edited >> app.txt",
                files={"modify": ["app.txt"]},
            ),
            phase("fresh", f"test ! -e {preimages}/{session}.fresh.tar"),  # no files: it saves none
        ],
    )
    pytester.runpytest("--maestro", "plan.yaml", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    assert list(preimages.iterdir()) == []
    write_plan(pytester, [phase("merged", "echo merged > app.txt", files={"modify": ["app.txt"]})])
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert (repo / "app.txt").read_text() == "merged\n"
    assert list(preimages.iterdir()) == []  # the merge-back saved one, and it went


def test_files_without_declarations_bring_back_the_whole_diff(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(
        pytester,
        [
            phase("one", "echo one >> app.txt", "mkdir -p new && echo n > new/file.txt"),
            phase("two", "rm old.txt", blocked_by=["one"]),
        ],
    )
    (repo / "old.txt").write_text("committed, never edited\n")
    git(repo, "add", "old.txt")
    git(repo, "commit", "-qm", "old.txt", "--", "old.txt")
    git(repo, "add", "plan.yaml")
    staged = git(repo, "diff", "--cached")
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert (repo / "app.txt").read_text() == "app v1\nthe user's uncommitted edit\none\n"
    assert (repo / "new" / "file.txt").read_text() == "n\n"
    assert not (repo / "old.txt").exists()  # committed: in git still
    assert git(repo, "diff", "--cached") == staged


def test_included_untracked_files_are_copied_and_ignored_declared_files_come_back(
    repo: Path, pytester: pytest.Pytester
) -> None:
    (repo / ".gitignore").write_text(".env\nbuild/\n")
    write_plan(
        pytester,
        [
            phase(
                "uses-env",
                "grep -q SECRET=1 .env",
                "mkdir -p build && echo built > build/out.bin",
                "echo changed > .env",
                files={"create": ["build/out.bin"]},
            )
        ],
        isolate_include=[".env"],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert (repo / "build" / "out.bin").read_text() == "built\n"
    assert (repo / ".env").read_text() == "SECRET=1\n"  # a copy went in; nothing came back


def test_an_include_leaving_the_root_is_one_line(repo: Path, pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    result = pytester.runpytest(
        "--maestro", "plan.yaml", ISOLATE, "-o", "maestro_isolate_include=../secrets"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [
        "ERROR: isolate_include: '../secrets' must be a path inside the project root"
    ]


def test_the_users_edit_during_the_run_is_a_conflict_naming_it(
    repo: Path, pytester: pytest.Pytester
) -> None:
    # The phase edits app.txt in its worktree while "the user" edits it in the main tree.
    write_plan(
        pytester,
        [
            phase(
                "late",
                'echo "edited during the run" >> "$MAESTRO_PROJECT_ROOT/app.txt"',
                "echo phase >> app.txt",
                files={"modify": ["app.txt"]},
                max_retries=0,
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*not merged back: conflicts with the user's edits during the run: app.txt"]
    )
    assert (repo / "app.txt").read_text().endswith("edited during the run\n")
    assert "phase" not in (repo / "app.txt").read_text()


def test_an_agent_cli_works_in_its_worktree_and_its_prompt_stays_in_the_state_dir(
    repo: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    state = repo.parent / f"{repo.name}-fake-state"  # the fake's records, outside the repository
    monkeypatch.setenv("FAKE_AGENT_STATE", str(state))
    task = {
        "id": "write",
        "description": "FAKE:EDIT out.txt=hello",
        "files": {"create": ["out.txt"]},
        "acceptance": [{"criterion": "says hello", "check": "grep -q hello out.txt"}],
    }
    write_plan(pytester, [task])
    before = user_state(repo)
    result = pytester.runpytest(
        "--maestro", "plan.yaml", ISOLATE, "--maestro-runtime=claude", "--maestro-autonomous"
    )
    result.assert_outcomes(passed=1)
    assert (repo / "out.txt").read_text() == "hello\n"
    [call] = [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]
    assert Path(call["cwd"]).is_relative_to(repo / ".maestro" / "worktrees")
    assert list((repo / ".maestro" / "logs").glob("write.attempt-1.prompt.md"))
    assert user_state(repo) == before
    assert worktrees(repo) == [str(repo)]


# -- interrupted and killed runs, many workers -----------------------------------------------


def _pytest(*options: str) -> list[str]:
    pytest_run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    return [*pytest_run, "--maestro", "plan.yaml", ISOLATE, "-q", *options]


def _marked(mark: str) -> list[int]:
    """Processes whose command line carries ``mark``: the test's own long commands."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("-n", "2")], ids=["in-order", "n2"])
def test_a_killed_run_s_worktrees_are_kept_and_pruned_by_the_next_run(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    init_repo(tmp_path)
    go = tmp_path.parent / f"{tmp_path.name}-go"  # outside the repository: the phase's signal
    mark = f"maestro-isolate-{os.getpid()}-{time.monotonic_ns()}"
    wait = f"test -e {go} || {sys.executable} -c 'import time; time.sleep(600)' {mark}"
    plan = {"phases": [{"id": "slow", "run": ["echo work > out.txt", wait]}]}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    before = user_state(tmp_path)
    run = subprocess.Popen(
        _pytest(*options),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".maestro/worktrees/*/w*/out.txt")):
            assert time.monotonic() < deadline and run.poll() is None, "the phase never started"
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        assert len(worktrees(tmp_path)) == 2  # the killed run's is still there
        go.touch()
        again = subprocess.run(_pytest(*options), cwd=tmp_path, capture_output=True, text=True)
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
    assert again.returncode == 0, again.stdout[-2000:]
    assert "after a killed run: phase 'slow': its work is kept as refs/maestro/" in again.stdout
    [ref] = kept_refs(tmp_path)
    assert git(tmp_path, "show", f"{ref}:out.txt") == "work\n"
    assert worktrees(tmp_path) == [str(tmp_path)]
    assert (tmp_path / "out.txt").read_text() == "work\n"  # the rerun's result, merged back
    assert user_state(tmp_path) == before


@pytest.mark.slow
def test_an_interrupted_phase_s_work_is_kept(tmp_path: Path) -> None:
    init_repo(tmp_path)
    mark = f"maestro-isolate-{os.getpid()}-{time.monotonic_ns()}"
    wait = f"{sys.executable} -c 'import time; time.sleep(600)' {mark}"
    plan = {"phases": [{"id": "cut", "run": ["echo halfway > out.txt", wait]}]}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    run = subprocess.Popen(_pytest(), cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _marked(mark):
            assert time.monotonic() < deadline and run.poll() is None, "the phase never started"
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)  # Ctrl-C
        out, _ = run.communicate(timeout=60)
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
    [ref] = kept_refs(tmp_path)
    assert "/kept/cut-" in ref
    assert git(tmp_path, "show", f"{ref}:out.txt") == "halfway\n"
    assert "Kept by pytest-maestro: the phase was interrupted." in git(tmp_path, "log", "-1", ref)
    assert worktrees(tmp_path) == [str(tmp_path)]
    assert not (tmp_path / "out.txt").exists(), out


# Eight at once, and twice a wave whose base holds the results merged from the wave before.
WAVES, WIDTH = 3, 8


@pytest.mark.slow
def test_eight_phases_at_once_each_get_a_working_worktree(
    repo: Path, pytester: pytest.Pytester
) -> None:
    phases = []
    for wave in range(WAVES):
        for n in range(WIDTH):
            pid = f"w{wave}p{n}"
            earlier = [f"w{wave - 1}p{m}" for m in range(WIDTH)] if wave else []
            check = (
                'test "$(git rev-parse --show-toplevel)" = "$MAESTRO_ROOT"'
                " && git diff --quiet HEAD -- app.txt"
                + "".join(f" && test -s out/{dep}" for dep in earlier)
            )
            phases.append(
                phase(
                    pid,
                    f"mkdir -p out && git rev-parse HEAD > out/{pid}",
                    files={"create": [f"out/{pid}"]},
                    blocked_by=earlier,
                    acceptance=[{"criterion": "a working worktree", "check": check}],
                    max_retries=0,
                )
            )
    write_plan(pytester, phases)
    before = user_state(repo)
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", ISOLATE, "-n", str(WIDTH), "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=WAVES * WIDTH)
    assert len(list((repo / "out").iterdir())) == WAVES * WIDTH
    assert user_state(repo) == before
    assert worktrees(repo) == [str(repo)]


@pytest.mark.parametrize("declared", [False, True], ids=["whole-diff", "declared"])
def test_file_names_that_are_not_utf8_come_back_as_they_were(
    repo: Path, pytester: pytest.Pytester, declared: bool
) -> None:
    raw = b"data-\xff.bin"  # a file name is bytes: not every one decodes as UTF-8
    write = "printf x > \"$(printf 'data-\\377.bin')\" && echo made > made.txt"
    files = {"files": {"create": ["made.txt"]}} if declared else {}
    write_plan(pytester, [phase("bytes", write, max_retries=0, **files)])
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    assert "Traceback" not in result.stdout.str()
    if declared:  # outside the declared files: named, kept, nothing brought back
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*changed files outside its declared ones: data-*.bin*"])
        assert not os.path.exists(os.fsencode(repo) + b"/" + raw)
        assert any("/kept/" in ref for ref in kept_refs(repo))
    else:
        result.assert_outcomes(passed=1)
        assert (repo / "made.txt").read_text() == "made\n"
        with open(os.fsencode(repo) + b"/" + raw, "rb") as brought_back:
            assert brought_back.read() == b"x"


def test_a_state_dir_isolation_cannot_use_is_one_line_and_leaves_the_session_free(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(pytester, [phase("a", "true")])
    (repo / ".maestro").mkdir()
    (repo / ".maestro" / ".gitignore").write_text("*\n")
    (repo / ".maestro" / "worktrees").write_text("")  # where worktrees go, taken by a file
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", ISOLATE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    [error] = [line for line in result.errlines if line.strip()]
    assert error.startswith("ERROR: cannot ") and "it is not a directory" in error, error
    assert str(repo / ".maestro" / "worktrees") in error
    (repo / ".maestro" / "worktrees").unlink()
    again = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider"
    )
    again.assert_outcomes(passed=1)  # the failed start left no lock behind


# A phase that rewrites app.txt in place at the same size at once, in the second its worktree's
# checkout wrote it, then works on: stat data alone cannot tell the rewrite.
BUMP = (
    "python3 -c \"f = open('app.txt', 'r+'); t = f.read(); f.seek(0); "
    "f.write(t.replace('v1', 'v2'))\""
)


@pytest.mark.slow
def test_a_same_size_rewrite_by_a_phase_without_file_lists_comes_back(
    repo: Path, pytester: pytest.Pytester
) -> None:
    write_plan(pytester, [phase("bump", BUMP, "sleep 1.1")])
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert (repo / "app.txt").read_text() == "app v2\nthe user's uncommitted edit\n"
    log = (repo / ".maestro" / "logs" / "bump.log").read_text()
    assert "--- merged back: app.txt" in log


@pytest.mark.slow
def test_a_killed_worker_s_same_size_rewrite_is_kept(tmp_path: Path) -> None:
    init_repo(tmp_path)
    mark = f"maestro-isolate-{os.getpid()}-{time.monotonic_ns()}"
    wait = f"{sys.executable} -c 'import time; time.sleep(600)' {mark}"
    plan = {"phases": [{"id": "bump", "run": [BUMP, wait]}]}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    run = subprocess.Popen(_pytest("-n", "2"), cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _marked(mark):
            assert time.monotonic() < deadline and run.poll() is None, "the phase never started"
            time.sleep(0.05)
        time.sleep(1.1)  # the run's last look at the worktree comes in a later second
        [slot] = tmp_path.glob(".maestro/worktrees/*/w*[0-9]")
        assert "app v2" in (slot / "app.txt").read_text()
        os.kill(int(slot.name[1:]), signal.SIGKILL)  # the worker running the phase
        out, _ = run.communicate(timeout=60)
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
    [ref] = [ref for ref in kept_refs(tmp_path) if "/kept/bump-" in ref]
    assert git(tmp_path, "show", f"{ref}:app.txt") == "app v2\nthe user's uncommitted edit\n", out
    assert worktrees(tmp_path) == [str(tmp_path)]


@pytest.mark.parametrize("undo", ["git reset -q --hard main", "git checkout -q -f develop"])
def test_a_whole_diff_that_undoes_the_users_work_fails_naming_it_and_keeps_it(
    repo: Path, pytester: pytest.Pytester, undo: str
) -> None:
    (repo / "new.txt").write_text("the user's new file, staged\n")
    git(repo, "add", "new.txt")
    write_plan(pytester, [phase("undo", undo, "echo made > made.txt", max_retries=0)])
    before = user_state(repo)
    plan = (repo / "plan.yaml").read_text()
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "attempt 1: would undo the user's uncommitted or untracked work: "
            "app.txt, new.txt, notes.txt, plan.yaml, staged.txt"
        ]
    )
    assert user_state(repo) == before
    assert (repo / "new.txt").read_text() == "the user's new file, staged\n"
    assert (repo / "plan.yaml").read_text() == plan
    assert not (repo / "made.txt").exists()  # all or nothing: its own file stays out too
    [ref] = [ref for ref in kept_refs(repo) if "/kept/undo-" in ref]
    assert git(repo, "show", f"{ref}:made.txt") == "made\n"


@pytest.mark.parametrize(
    "prune",
    [
        "git stash clear && git gc -q --prune=now",
        "git reflog expire --expire=now --all && git gc -q --prune=now",
        "git branch -D feature && git tag -d v2 && git gc -q --prune=now",
    ],
    ids=["stash-clear", "reflog-expire", "branch-and-tag"],
)
def test_the_users_refs_survive_a_gc_in_a_worktree(
    repo: Path, pytester: pytest.Pytester, prune: str
) -> None:
    git(repo, "stash", "-q", "-m", "the user's first")  # the user's edits, stashed twice
    (repo / "app.txt").write_text("app v3\n")
    git(repo, "stash", "-q", "-m", "the user's second")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "feature.txt").write_text("only on feature\n")
    git(repo, "add", "feature.txt")
    git(repo, "commit", "-qm", "feature")
    git(repo, "tag", "-a", "v2", "-m", "a release on feature")
    git(repo, "checkout", "-q", "main")
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    stash = git(repo, "stash", "list", "--format=%H %gs")
    write_plan(pytester, [phase("prune", prune, "echo made > made.txt", max_retries=0)])
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert git(repo, "stash", "list", "--format=%H %gs") == stash
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)") == refs
    for line in refs.splitlines() + stash.splitlines():
        git(repo, "cat-file", "-e", line.split()[0 if "refs/" not in line else 1])
    git(repo, "stash", "apply", "-q", "stash@{1}")  # whole: its tree and parents are there
    assert (repo / "app.txt").read_text() == "app v1\nthe user's uncommitted edit\n"


def test_the_shared_git_config_a_phase_changes_is_put_back_and_its_version_kept(
    repo: Path, pytester: pytest.Pytester
) -> None:
    config = repo / ".git" / "config"
    users = config.read_bytes()
    write_plan(
        pytester,
        [
            phase(
                "configures",
                "git config user.email agent@example.com",
                "git config core.hooksPath agent-hooks",
                "echo made > made.txt",
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", ISOLATE, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert config.read_bytes() == users
    log = (repo / ".maestro" / "logs" / "configures.log").read_text()
    [line] = [line for line in log.splitlines() if ".git/config" in line]
    kept = repo / line.rsplit(" ", 1)[1]
    assert kept.is_relative_to(repo / ".maestro" / "kept")
    assert "agent@example.com" in kept.read_text() and "hooksPath" in kept.read_text()
