"""The facts a phase's report carries, decoded once per report and kept by node id and stage,
for every hook of this plugin that reads the report (the session's record, its status word, the
progress line), however many read it."""

from __future__ import annotations

import pytest

from ..phase.facts import PhaseFacts


class ReportFacts:
    def __init__(self) -> None:
        # (node id, setup/call/teardown) -> its latest report and that report's facts: read again
        # by pytest's short summary at the end; a rerun's report replaces the entry.
        self._kept: dict[tuple[str, str], tuple[pytest.TestReport, PhaseFacts | None]] = {}

    def __call__(self, report: pytest.TestReport) -> PhaseFacts | None:
        key = (report.nodeid, report.when or "")
        kept = self._kept.get(key)
        if kept is not None and kept[0] is report:
            return kept[1]
        facts = PhaseFacts.of(report)
        self._kept[key] = (report, facts)
        return facts

    def forget(self, report: pytest.TestReport) -> None:
        """The report's facts changed (a remote phase's, once brought in): read them again."""
        self._kept.pop((report.nodeid, report.when or ""), None)


_KEY = pytest.StashKey[ReportFacts]()


def report_facts(config: pytest.Config) -> ReportFacts:
    """The run's one ``ReportFacts``."""
    return config.stash.setdefault(_KEY, ReportFacts())
