"""A Markdown document's block structure, from a CommonMark parser (markdown-it-py).

What the readers need of it: for every line, whether it is literal text (in a code block or an
HTML block such as a comment: never structure) and whether a heading (ATX or setext) starts
there; and the document's list items with their real nesting. Inline parsing is left out: the
readers look at inline text with their own small patterns, and it would double the cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    text: str
    in_fence: bool  # in a fenced code block (fence lines included): text, never structure
    in_block: bool = False  # in an HTML block (a comment) or an indented code block
    heading: tuple[int, str] | None = None  # (level, text) where an ATX or setext heading starts

    @property
    def literal(self) -> bool:
        """Text that is never structure: no heading, field or list item is read from it."""
        return self.in_fence or self.in_block


@dataclass(frozen=True)
class ListItem:
    """A list item: its lines, nesting and the text of its first paragraph (lines joined)."""

    line: int  # 1-based line of its marker
    end: int  # 1-based line after its last line
    depth: int  # 0 for an item of a top-level list, 1 for one nested in an item, ...
    text: str
    parent: int | None  # index in the document's items of the item holding this one


@dataclass(frozen=True)
class Blocks:
    lines: tuple[Line, ...]
    items: tuple[ListItem, ...]


def parser() -> MarkdownIt:
    # Imported here: a run of a JSON or YAML plan does not pay for it. A parser is cheap to
    # build; one per document keeps no state between documents.
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable(["inline", "text_join"])


def parse_blocks(text: str, hidden_lines: int = 0) -> Blocks:
    """The blocks of ``text`` (``\\n`` line ends); its first ``hidden_lines`` lines (a YAML
    frontmatter) are parsed as blank lines so that they never become a setext heading."""
    raw = text.split("\n")
    shown = "\n" * hidden_lines + "\n".join(raw[hidden_lines:])
    tokens = parser().parse(shown)
    fence = [False] * len(raw)
    block = [False] * len(raw)
    headings: dict[int, tuple[int, str]] = {}
    items: list[ListItem] = []
    open_items: list[int] = []
    for index, token in enumerate(tokens):
        start, end = token.map if token.map else (0, 0)
        if token.type == "fence":
            fence[start:end] = [True] * (end - start)
        elif token.type in ("code_block", "html_block"):
            block[start:end] = [True] * (end - start)
        elif token.type == "heading_open":
            headings[start] = (int(token.tag[1]), _inline(tokens, index).replace("\n", " "))
            if token.markup in ("=", "-"):  # setext: the underline is no rule
                block[end - 1] = True
        elif token.type == "list_item_open":
            parent = open_items[-1] if open_items else None
            text = _first_paragraph(tokens, index)
            items.append(ListItem(start + 1, end + 1, len(open_items), text, parent))
            open_items.append(len(items) - 1)
        elif token.type == "list_item_close":
            open_items.pop()
    lines = tuple(
        Line(n + 1, line, fence[n], block[n], headings.get(n)) for n, line in enumerate(raw)
    )
    return Blocks(lines, tuple(items))


def _inline(tokens: Sequence[Token], index: int) -> str:
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    return following.content.strip() if following and following.type == "inline" else ""


def _first_paragraph(tokens: Sequence[Token], index: int) -> str:
    """The text of the paragraph that opens the item at ``index`` ('' when it opens with
    another block, such as a code block)."""
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    if following is None or following.type != "paragraph_open":
        return ""
    return _inline(tokens, index + 1)
