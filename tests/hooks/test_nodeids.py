"""A phase's node id, read and written by one parser (``hooks/nodeids.py``)."""

from __future__ import annotations

import pytest

from pytest_maestro.hooks.collect import SYNC_NAME
from pytest_maestro.hooks.nodeids import NodeId, phase_id


@pytest.mark.parametrize(
    ("text", "file", "name"),
    [
        ("plan.yaml::a", "plan.yaml", "a"),
        ("plans/release plan.md::1.2", "plans/release plan.md", "1.2"),
        (f"plan.yaml::{SYNC_NAME}", "plan.yaml", SYNC_NAME),
        ("plan.yaml::", "plan.yaml", ""),
    ],
)
def test_a_node_id_is_its_file_and_its_name(text: str, file: str, name: str) -> None:
    node = NodeId.of(text)
    assert (node.file, node.name) == (file, name)
    assert str(node) == text


def test_a_path_alone_names_no_item() -> None:
    assert NodeId.parse("plan.yaml") is None
    with pytest.raises(ValueError, match=r"not a phase's node id: 'plan\.yaml'"):
        NodeId.of("plan.yaml")


def test_another_item_of_the_same_plan() -> None:
    sync = NodeId.of(f"sub/plan.yaml::{SYNC_NAME}")
    assert str(sync.sibling("b")) == "sub/plan.yaml::b"
    assert phase_id("sub/plan.yaml::b") == "b"
