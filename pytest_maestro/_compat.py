"""Every use of a private pytest or pytest-xdist API, in one place.

Each item says why no public API does the job and since which version the private one has been
there. ``.ci/run`` runs the suite against the pinned and the newest pytest and pytest-xdist, so a
release that changes one of these is seen here first. Nothing else in the package may touch
``_pytest``, xdist's internals or another plugin's attributes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pytest

# The type ``Item.repr_failure`` may return besides ``str`` (pytest >= 6), not exported by pytest;
# and the junitxml plugin's LogXML with the stash key it lives under (see JunitSuite).
from _pytest._code.code import TerminalRepr as TerminalRepr
from _pytest.junitxml import LogXML, xml_key

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController as WorkerController
else:
    WorkerController = Any


def leave_to_python(package: str) -> None:
    """Import ``package``'s modules as Python does, not through pytest's assertion rewriting.

    pytest rewrites the asserts of every module of a distribution with a ``pytest11`` entry
    point. Where it cannot write its own bytecode cache beside them (PYTHONDONTWRITEBYTECODE,
    as many container images set; a read-only site-packages) it parses, rewrites and compiles
    each module again in every process, this package's hundred in about a third of a second: in
    the controller and again in each xdist worker, which then come up that much later and
    further apart. Python's own import uses the bytecode pip compiled at install. The package's
    asserts state invariants, where a plain ``AssertionError`` says enough. The public way,
    ``PYTEST_DONT_REWRITE`` in a module's docstring, still has the hook parse and compile the
    module in every process; only taking the package off the hook's set of marked names,
    ``_must_rewrite``, and its cache of answers (both there since pytest 3.x, long before 9.0,
    the oldest release this package supports) leaves it to Python. Done once a process, when
    the package is first imported: a later session in the same process (``pytest.main`` again,
    an in-process pytester run) marks it again, which costs what lazily imported modules take
    to rewrite, and nothing else (``plugin.py`` says in its docstring that it needs no
    rewriting, so pytest does not warn that it is imported already).
    """
    rewriting = sys.modules.get("_pytest.assertion.rewrite")
    if rewriting is None:  # not inside pytest: nothing rewrites
        return
    for finder in sys.meta_path:
        if isinstance(finder, rewriting.AssertionRewritingHook):
            with contextlib.suppress(AttributeError, KeyError):
                finder._must_rewrite.discard(package)
                finder._marked_for_rewrite_cache.clear()


def skip_at_item(reason: str) -> BaseException:
    """A skip reported at the item's location (the phase's line in the plan) rather than at the
    line of the plugin that raised it, as pytest does for skip markers: the private keyword
    ``_use_item_location`` (pytest >= 7.0)."""
    return pytest.skip.Exception(reason, _use_item_location=True)


def outside_capture(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """Lift pytest's output capture while writing a line to the terminal from inside a test's
    call, as pytest's live logging does: the capture manager plugin's
    ``global_and_fixture_disabled`` (pytest >= 3.7). No public API writes to the terminal then;
    without it the line would land in the phase's captured output."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None:
        return contextlib.nullcontext()
    disabled: contextlib.AbstractContextManager[None] = capman.global_and_fixture_disabled()
    return disabled


# -- JUnit XML --------------------------------------------------------------------------------


class JunitSuite:
    """The junitxml plugin's LogXML (pytest >= 3), through the few members this plugin uses.

    The ``record_testsuite_property`` fixture is the public way to add suite properties, but a
    fixture cannot run in the controller's report hooks, and nothing public adds a property to
    a testcase from a hook.
    """

    def __init__(self, xml: LogXML) -> None:
        self._xml = xml

    @property
    def family(self) -> str:
        return str(self._xml.family)

    def add_property(self, name: str, value: object) -> None:
        self._xml.add_global_property(name, value)

    def replace_properties(self, prefix: str, properties: Iterable[tuple[str, object]]) -> None:
        """Replace the suite properties whose names start with ``prefix``
        (``LogXML.global_properties`` is the list ``add_global_property`` appends to)."""
        xml = self._xml
        kept = [(k, v) for k, v in xml.global_properties if not k.startswith(prefix)]
        xml.global_properties = kept
        for name, value in properties:
            xml.add_global_property(prefix + name, value)

    def add_testcase_property(self, report: pytest.TestReport, name: str, value: str) -> None:
        """A property inside the report's testcase (valid in xunit1 only)."""
        self._xml.node_reporter(report).add_property(name, value)


def junit_suite(config: pytest.Config) -> JunitSuite | None:
    """The JUnit file being written, if any: the plugin keeps its LogXML under ``xml_key``
    in the config's stash (pytest >= 7), with no public accessor."""
    xml = config.stash.get(xml_key, None)
    return None if xml is None else JunitSuite(xml)


# -- pytest's cache plugin --------------------------------------------------------------------


def remember_failed(config: pytest.Config, nodeids: Iterable[str]) -> None:
    """Put node ids into ``--lf``'s record of failures (``cache/lastfailed``).

    pytest forgets a test whose last report was a skip, but a phase skipped because its
    dependency failed must run again with ``--lf``. The LF plugin's ``lastfailed`` dict (pytest
    >= 3.5) is written to the cache by its own ``pytest_sessionfinish``, after ours; writing the
    cache key directly would be overwritten by it.
    """
    lfplugin = config.pluginmanager.get_plugin("lfplugin")
    if lfplugin is not None:
        lfplugin.lastfailed.update(dict.fromkeys(nodeids, True))


# -- pytest-xdist's controller (DSession, xdist >= 2) -----------------------------------------


def _dsession(config: pytest.Config) -> Any:
    return config.pluginmanager.get_plugin("dsession")


def runs_distributed(config: pytest.Config) -> bool:
    """Whether this process is the controller of an xdist run (its plugin is registered under
    the name ``dsession``)."""
    return _dsession(config) is not None


def xdist_shutting_down(config: pytest.Config) -> bool:
    """``-x``, ``--maxfail`` or a stop request made the controller shut its workers down
    (``DSession.shuttingdown``): a scheduler should start nothing more."""
    return bool(getattr(_dsession(config), "shuttingdown", False))


def stop_session(config: pytest.Config, session: pytest.Session | None, reason: str) -> None:
    """Stop the run as ``-x`` does: ``Session.shouldstop`` (public) ends an in-process loop;
    under xdist the controller reads its own ``DSession.shouldstop`` to shut workers down."""
    if session is not None:
        session.shouldstop = reason
    dsession = _dsession(config)
    if dsession is not None and not dsession.shouldstop:
        dsession.shouldstop = reason


def stop_message(config: pytest.Config, session: pytest.Session | None) -> str | None:
    """Why the run stopped early, if it did: ``Session.shouldfail``/``shouldstop`` (public;
    ``-x``, ``--maxfail``, a stop request) or, under xdist, ``DSession.shouldstop``."""
    for reason in (
        getattr(session, "shouldfail", False),
        getattr(session, "shouldstop", False),
        getattr(_dsession(config), "shouldstop", False),
    ):
        if reason:
            return str(reason)
    return None


def set_collected_count(config: pytest.Config, count: int) -> None:
    """Correct the number of collected tests that progress percentages divide by.

    xdist counts the hidden sync item as a test, again at each worker's collection; it sets the
    count on the session it keeps in ``DSession._session``.
    """
    session = getattr(_dsession(config), "_session", None)
    if session is not None:
        session.testscollected = count


def crashed_worker_id(report: pytest.TestReport) -> str:
    """The worker a crash report came from: xdist's ``handle_crashitem`` sets ``report.node``
    to the WorkerController (xdist >= 1.x), whose gateway id names the worker."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    return str(getattr(gateway, "id", "?"))


# -- pytest-xdist's channel from a worker to the controller (xdist >= 2) ----------------------

# The event a worker sends when an item's run protocol ended; the controller hands it to the
# scheduler alone (``DSession.worker_runtest_protocol_complete`` calls ``mark_test_complete``).
_PROTOCOL_COMPLETE = "runtest_protocol_complete"


def controller_channel(config: pytest.Config) -> Callable[[str], None] | None:
    """On an xdist worker: a function that sends a text to the controller's scheduler, None
    where there is no channel to it.

    No public API sends a plugin's own message. xdist forwards a fixed set of events
    (``WorkerInteractor.sendevent``, xdist >= 2; ``WorkerController.process_from_remote`` refuses
    any other name), and every one but ``runtest_protocol_complete`` ends in a pytest hook that
    every plugin receives: a re-sent ``pytest_runtest_logstart`` is a test start to all of them.
    So the text goes as that event with the text as its item index, which only the scheduler
    sees; ``relayed`` tells it from a real index. The interactor is registered without a name:
    it is found by its class and its ``sendevent``.
    """
    interactor = next(
        (
            plugin
            for plugin in config.pluginmanager.get_plugins()
            if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "sendevent")
        ),
        None,
    )
    if interactor is None:
        return None

    def send(text: str) -> None:
        interactor.sendevent(_PROTOCOL_COMPLETE, item_index=text, duration=0.0)

    return send


def relayed(item_index: object) -> str | None:
    """The text a worker sent through ``controller_channel``, given the item index the
    scheduler's ``mark_test_complete`` received; None for a real index."""
    return item_index if isinstance(item_index, str) else None
