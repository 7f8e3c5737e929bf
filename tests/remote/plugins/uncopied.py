"""Loaded by the remote tests' runs (``PYTEST_PLUGINS``): xdist sends no copy of pytest's own
source to ``chdir=``/``ssh=`` workers.

xdist copies pytest into every such worker's folder, where each worker compiles it afresh (one to
two seconds a worker, every test, its folders being new). The workers here run on this machine,
under this interpreter, with this pytest installed: the copy proves nothing of pytest-maestro's,
and one test (``test_a_plan_run_remote_leaves_the_tree_a_local_isolated_run_leaves``) still runs
with it, as users' runs do."""

from __future__ import annotations

from pathlib import Path

from xdist.workermanage import NodeManager


def _no_roots(self: NodeManager) -> list[Path]:
    return []


NodeManager._getrsyncdirs = _no_roots  # type: ignore[method-assign]
