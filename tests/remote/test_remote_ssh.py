"""Remote phases over ssh: workers that reach a real sshd on the loopback (``sshd``, in
``conftest.py``), each in a folder of its own that stands for a host. What the ``popen//chdir``
tests prove (``test_remote_phases.py``) holds through ssh too: the tree a local isolated run
leaves, and a host lost mid-run costing nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .sshd import Sshd
from .test_remote_phases import CHAIN, git, lose_a_host, make_project, run, tree

pytestmark = pytest.mark.slow


def ssh_hosts(sshd: Sshd, base: Path, count: int) -> list[str]:
    """``--tx ssh=…`` options for ``count`` workers through the loopback sshd, each in a
    folder of its own."""
    options = []
    for n in range(count):
        home = base / f"ssh-host{n}"
        home.mkdir(parents=True)
        options += ["--tx", sshd.spec(sys.executable, chdir=home)]
    return [*options, "-d"]


def test_a_plan_run_over_ssh_leaves_the_tree_a_local_isolated_run_leaves(
    sshd: Sshd, tmp_path: Path
) -> None:
    local = make_project(tmp_path / "local", CHAIN)
    remote = make_project(tmp_path / "remote", CHAIN)
    head = git(remote, "rev-parse", "HEAD")
    alone = run(local, "--maestro-isolate=worktree")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    far = run(remote, *ssh_hosts(sshd, tmp_path, 2))
    assert far.returncode == 0, far.stdout + far.stderr
    assert "4 passed" in far.stdout
    assert tree(remote) == tree(local)
    assert git(remote, "rev-parse", "HEAD") == head
    assert git(remote, "for-each-ref", "refs/maestro/") == ""
    # The phases ran on the hosts, each in the repository its bundles built there.
    used = [h for h in tmp_path.glob("ssh-host*") if (h / ".maestro-remote").is_dir()]
    assert used


def test_a_host_lost_over_ssh_mid_phase_loses_nothing_and_the_run_completes(
    sshd: Sshd, tmp_path: Path
) -> None:
    # The worker killed under its phase takes its ssh connection, and so its gateway, with it.
    lose_a_host(tmp_path, ssh_hosts(sshd, tmp_path, 2))
