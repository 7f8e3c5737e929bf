"""Mermaid text that renders whatever a plan names: node ids, labels and Gantt task names.

Phase ids and names come from plan files and may hold any character; Mermaid's grammar reads
quotes, brackets, colons and ``#`` as syntax. Everything written into a diagram goes through here.
"""

from __future__ import annotations

import re

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_]")
_LABEL_ESCAPES = str.maketrans(
    {
        "#": "#35;",  # one pass: the '#' the other escapes introduce is not escaped again
        '"': "#quot;",
        "<": "#lt;",
        ">": "#gt;",
        "&": "#amp;",
        "`": "#96;",
        "|": "#124;",
    }
)
_MAX_LABEL = 80
# A Gantt line is ``name :tags, id, start, end``: its name ends at the first colon, and ``#``
# or ``;`` start comments or entities there, so a name keeps only what cannot be read as syntax.
_GANTT_UNSAFE = re.compile(r"[^\w .,()/+-]")


def mermaid_id(index: int, phase_id: str) -> str:
    """A node id Mermaid accepts: unique by position, readable by the sanitised phase id."""
    return f"p{index}_{_UNSAFE_ID.sub('_', phase_id)[:40]}"


def mermaid_label(text: str) -> str:
    """Text for a quoted node label: one line, at most 80 characters, syntax escaped."""
    text = " ".join(text.split())
    if len(text) > _MAX_LABEL:
        text = text[: _MAX_LABEL - 3] + "..."
    return text.translate(_LABEL_ESCAPES)


def gantt_text(text: str) -> str:
    """Text for a Gantt task or section name: one line, no character Mermaid reads as syntax."""
    text = " ".join(_GANTT_UNSAFE.sub("_", text).split())
    if len(text) > _MAX_LABEL:
        text = text[: _MAX_LABEL - 3] + "..."
    return text or "_"
