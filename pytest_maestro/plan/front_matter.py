"""The ``---`` block at the top of a Markdown file (plans, agent definitions, session files).

The delimiters are python-frontmatter's (its YAML handler's boundary: a line of three or more
dashes), so every file here splits as that library splits it. The library hands back only the
text between them, with the document stripped first; an error message needs to know which line
of the file the block starts on, so the boundary is matched here and the lines counted.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any


@functools.cache
def _delimiter() -> re.Pattern[str]:
    # Imported on first use: python-frontmatter imports PyYAML, which a process that splits no
    # frontmatter (an xdist worker running commands) need not load.
    from frontmatter.default_handlers import YAMLHandler

    pattern: re.Pattern[str] = YAMLHandler.FM_BOUNDARY
    return pattern


@dataclass(frozen=True)
class FrontMatter:
    text: str  # between the delimiter lines
    first_line: int  # the file's line (1-based) that a parser of ``text`` counts as its line 0
    closing_line: int  # the line (1-based) of the closing delimiter
    body_start: int  # where the rest of the document starts, as an index into its text


def split_front_matter(text: str) -> FrontMatter | None:
    """The block between a delimiter line that opens ``text`` and the next one, or None."""
    if not text.startswith("---"):  # what any match of the delimiter at the start begins with
        return None
    delimiter = _delimiter()
    opening = delimiter.match(text)
    if opening is None:
        return None
    closing = delimiter.search(text, opening.end())
    if closing is None:
        return None
    end = closing.start()
    if end > opening.end() and text[end - 1] == "\n":
        # Without the line break before the closing delimiter, an error at the end of the block
        # ("expected ']'") is on its last line, not on the delimiter's.
        end -= 1
    return FrontMatter(
        text=text[opening.end() : end],
        first_line=text.count("\n", 0, opening.end()) + 1,
        closing_line=text.count("\n", 0, closing.start()) + 1,
        body_start=closing.end(),
    )


class FrontMatterError(ValueError):
    """YAML frontmatter that does not load: the problem, and the line of the file it is on."""

    def __init__(self, problem: str, line: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


def load_yaml(block: FrontMatter) -> dict[str, Any]:
    """The block as YAML, ``{}`` when that is not a mapping; raises :class:`FrontMatterError`."""
    import yaml  # with the first frontmatter loaded: see _delimiter

    from .yaml_loader import safe_load

    try:
        data = safe_load(block.text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = block.first_line + (mark.line if mark is not None else 0)
        raise FrontMatterError(exc.problem or "not valid YAML", line) from None
    except yaml.reader.ReaderError as exc:
        line = block.first_line + block.text.count("\n", 0, exc.position)
        raise FrontMatterError(exc.reason, line) from None
    except yaml.YAMLError:
        raise FrontMatterError("not valid YAML", _FIRST_LINE) from None
    except RecursionError:
        raise FrontMatterError("nested too deeply", _FIRST_LINE) from None
    return data if isinstance(data, dict) else {}


_FIRST_LINE = 2  # of a frontmatter, after the delimiter that opens the file
