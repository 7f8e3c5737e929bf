"""Two spellings of one file are one file: phases that declare it never run side by side, and no
retry's restore wipes another phase's completed result."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_maestro.plan import load_plan
from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.paths import real_paths

from ..helpers import write_plan

# (what phase "a" declares, what phase "b" declares, the file both end up writing)
ALIASES = [
    pytest.param("./notes.txt", "notes.txt", "notes.txt", id="dot-slash"),
    pytest.param("notes.txt/", "notes.txt", "notes.txt", id="trailing-slash"),
    pytest.param("dir//x.txt", "dir/x.txt", "dir/x.txt", id="double-slash"),
    pytest.param("dir/./x.txt", "dir/x.txt", "dir/x.txt", id="dot-segment"),
    pytest.param("link.txt", "notes.txt", "notes.txt", id="symlink"),
    pytest.param("alias/x.txt", "dir/x.txt", "dir/x.txt", id="symlinked-folder"),
    pytest.param("dir", "dir/x.txt", "dir/x.txt", id="folder-and-file"),
]


def _project(root: Path) -> None:
    (root / "dir").mkdir()
    (root / "dir" / "x.txt").write_text("before\n")
    (root / "notes.txt").write_text("before\n")
    (root / "link.txt").symlink_to("notes.txt")
    (root / "alias").symlink_to("dir")


# End to end, one alias of each kind: spelling (the graph test below covers every spelling), a link
# resolved against the root, a folder against a file in it.
END_TO_END = [p for p in ALIASES if p.id in {"dot-slash", "symlinked-folder", "folder-and-file"}]


@pytest.mark.slow
@pytest.mark.parametrize(("first", "second", "target"), END_TO_END)
def test_phases_that_declare_one_file_by_two_names_never_overlap_and_lose_nothing(
    pytester: pytest.Pytester, first: str, second: str, target: str
) -> None:
    # Each waits (a second at most) for the other: side by side, "a" writes its line during
    # "b"'s first attempt, and the restore before "b"'s retry wipes it; "a" is never run again.
    root = pytester.path
    _project(root)
    stamp = 'echo "$MAESTRO_PHASE_ID {} $(date +%s.%N)" >> times.log'
    wait = "for i in $(seq 10); do {} && break; sleep 0.1; done"
    a = [
        stamp.format("start"),
        wait.format("test -e b.started") + f"; echo a >> {target}",
        stamp.format("end"),
    ]
    b = [
        stamp.format("start") + "; touch b.started",
        f"echo b$MAESTRO_ATTEMPT >> {target}; " + wait.format(f"grep -qx a {target}"),
        stamp.format("end"),
    ]
    retry = {"criterion": "second attempt", "check": 'test "$MAESTRO_ATTEMPT" = 2'}
    write_plan(
        pytester,
        [
            {"id": "a", "run": a, "files": [first]},
            {"id": "b", "run": b, "files": [second], "acceptance": [retry]},
        ],
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--maestro", "plan.yaml", "-n", "2"
    )
    result.assert_outcomes(passed=2)
    lines = (root / target).read_text().splitlines()
    assert sorted(lines) == ["a", "b2", "before"], lines  # b1 put back, a's line kept
    spans: dict[str, list[float]] = {}
    for line in (root / "times.log").read_text().splitlines():
        phase, _, when = line.split()
        spans.setdefault(phase, []).append(float(when))
    (a_start, a_end), (b_start, *_, b_end) = sorted(spans["a"]), sorted(spans["b"])
    assert a_end <= b_start or b_end <= a_start, spans


@pytest.mark.parametrize(("first", "second", "target"), ALIASES)
def test_the_graph_sees_two_names_of_one_file_as_a_conflict(
    pytester: pytest.Pytester, first: str, second: str, target: str
) -> None:
    root = pytester.path
    _project(root)
    write_plan(
        pytester,
        [
            {"id": "a", "run": ["true"], "files": [first]},
            {"id": "b", "run": ["true"], "files": [second]},
        ],
    )
    plan = load_plan(root / "plan.yaml")
    graph = PlanGraph(
        plan, aliases=real_paths(root, [p for ph in plan.phases for p in ph.files.all()])
    )
    assert graph.conflicting("a") == {"b"}
    assert graph.conflicting("b") == {"a"}
    assert graph.claims("a")[0] == graph.claims("b")[0] or "dir" in graph.claims("a")[0]


def test_files_inside_a_folder_no_phase_declares_whole_still_run_side_by_side(
    pytester: pytest.Pytester,
) -> None:
    files = [["dir/x.txt"], ["dir/y.txt"], ["./dir/z.txt", "dir/z.txt/"]]
    write_plan(
        pytester, [{"id": f"p{n}", "run": ["true"], "files": f} for n, f in enumerate(files)]
    )
    plan = load_plan(pytester.path / "plan.yaml")
    assert plan.phases[2].files.modify == ("dir/z.txt",)  # one spelling, once
    graph = PlanGraph(plan)
    assert not graph.conflicts()


def test_real_paths_resolve_links_inside_the_root_only_and_never_raise(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _project(root)
    (root / "out").symlink_to(tmp_path)
    paths = ["link.txt", "alias/x.txt", "notes.txt", "out/x", "a\x00b", "n" * 5000 + "/x"]
    assert real_paths(root, paths) == {"link.txt": "notes.txt", "alias/x.txt": "dir/x.txt"}
