"""The output formats of ``--maestro-analyze`` and ``--maestro-status``, apart from the views that
render them: pytest offers them as the options' choices in every process, with ``--maestro`` or
without, and none of those processes should import a renderer for that."""

from __future__ import annotations

ANALYZE_FORMATS = ("text", "json", "mermaid")
STATUS_FORMATS = ("text", "json")
