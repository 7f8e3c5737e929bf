"""pytest entry point: options and wiring only. Dormant until ``--maestro PLAN`` is given.

PYTEST_DONT_REWRITE: the package is imported as Python imports it (``_compat.leave_to_python``),
so a run that names this module with ``-p`` finds it imported and is told it needs no rewriting.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from . import numbers
from .plan import PlanError
from .settings import OPTIONS, Settings, SettingsError, written_float, written_int
from .views.formats import ANALYZE_FORMATS, STATUS_FORMATS

# Every pytest process imports this module, with --maestro or without, and so does every xdist
# worker: what a run needs is imported where the run starts, and what only some runs need (a
# plan's reading, a runtime, the scheduler, a view) where they use it.
if TYPE_CHECKING:
    from .plan.graph import PlanGraph
    from .run.orchestrator import Orchestrator, Role
    from .runtimes import Runtime

PLAN_HELP = "run the phases of this implementation plan as test items"
ANALYZE_HELP = (
    "print the plan's waves, chunks and critical path (text, json or mermaid); run nothing"
)
STATUS_HELP = (
    "print the plan's phases as its session has them (text or json), also beside a running "
    "run; run nothing; exit 0 when every phase completed (and the last final review, if any, "
    "passed), 1 otherwise"
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import newhooks

    pluginmanager.add_hookspecs(newhooks)


@pytest.hookimpl(trylast=True)
def pytest_maestro_runtimes(config: pytest.Config) -> list[Runtime]:
    """The built-in runtimes, after any a plugin provides."""
    from .runtimes import BUILTIN_RUNTIMES

    return list(BUILTIN_RUNTIMES)


def runtimes(config: pytest.Config) -> dict[str, Runtime]:
    """Every runtime by name; the first plugin to name one wins over later ones."""
    found: dict[str, Runtime] = {}
    for provided in config.hook.pytest_maestro_runtimes(config=config):
        for runtime in provided:
            found.setdefault(runtime.name, runtime)
    return found


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("maestro", "pytest-maestro: run an implementation plan")
    group.addoption("--maestro", metavar="PLAN", default=None, help=PLAN_HELP)
    group.addoption(
        "--maestro-analyze",
        nargs="?",
        const="text",
        default=None,
        choices=ANALYZE_FORMATS,
        metavar="FORMAT",
        help=ANALYZE_HELP,
    )
    group.addoption(
        "--maestro-status",
        nargs="?",
        const="text",
        default=None,
        choices=STATUS_FORMATS,
        metavar="FORMAT",
        help=STATUS_HELP,
    )
    for option in OPTIONS:
        help_text = option.help
        if option.default not in (None, False):
            numeric = option.kind in ("int", "float")
            shown = format(option.default, "g") if numeric else option.default
            help_text += f" (default: {shown})"
        if option.bounds is not None:
            help_text += f" [{option.bounds.rule().removeprefix('a ')}]"
        if option.env:
            unit = " in minutes" if option.env_scale == 60 else ""
            help_text += f" [env {option.env}{unit}]"
        if option.kind in ("limits", "workers"):
            group.addoption(
                option.flag, action="append", default=None, dest=option.ini, help=help_text
            )
        elif option.kind == "bool":
            group.addoption(
                option.flag, action="store_true", default=False, dest=option.ini, help=help_text
            )
        else:
            group.addoption(
                option.flag,
                dest=option.ini,
                default=None,
                type={"int": written_int, "float": written_float}.get(option.kind, str),
                choices=option.choices or None,
                help=help_text,
            )
        parser.addini(option.ini, help_text, type="string", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--maestro-analyze`` and ``--maestro-status`` print and end the run before any
    collection."""
    if config.getoption("maestro_status"):
        return show_status(config)
    if not config.getoption("maestro_analyze"):
        return None
    if not config.getoption("maestro"):
        sys.stderr.write("ERROR: --maestro-analyze needs the plan to analyse: --maestro PLAN\n")
        return pytest.ExitCode.USAGE_ERROR
    from .plan import load_graph
    from .views.analysis import render

    try:
        settings = Settings.from_config(config)
        graph = load_graph(settings.plan, settings.format, settings.tag)
    except (PlanError, SettingsError) as exc:
        sys.stderr.write(f"ERROR: {exc}\n")
        return pytest.ExitCode.USAGE_ERROR
    text = render(graph.plan, settings.analyze or "text", graph)
    sys.stdout.write(text.rstrip("\n") + "\n")
    return pytest.ExitCode.OK


def show_status(config: pytest.Config) -> int:
    from .plan import load_plan
    from .state import StateError
    from .views.status import show

    if not config.getoption("maestro"):
        sys.stderr.write("ERROR: --maestro-status needs the plan: --maestro PLAN\n")
        return pytest.ExitCode.USAGE_ERROR
    try:
        settings = Settings.from_config(config)
        plan = load_plan(settings.plan, settings.format, settings.tag)
        root = project_root(config, settings.root, plan.root, plan.path, create=False)
        state_dir_inside(root, settings.state_dir)
        text, code = show(plan, root, settings.state_dir, settings.status or "text")
    except (PlanError, SettingsError, StateError) as exc:
        sys.stderr.write(f"ERROR: {exc}\n")
        return pytest.ExitCode.USAGE_ERROR
    sys.stdout.write(text)
    return code


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("maestro"):
        return
    from .hooks import progress
    from .hooks.collect import ORCHESTRATOR_KEY
    from .hooks.session import MaestroSession

    role = process_role(config)
    try:
        maestro = remote_worker(config, role) or local_orchestrator(
            config, Settings.from_config(config), role
        )
    except (PlanError, SettingsError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[ORCHESTRATOR_KEY] = maestro
    for line in maestro.resolve.marker_lines():
        config.addinivalue_line("markers", line)
    # Collect the plan and nothing else, whatever testpaths or arguments say; node ids of its
    # phases (plan.yaml::p3) select those phases, as -k would.
    if maestro.remote is None:
        config.args = phase_node_ids(config.args, maestro.plan.path) or [str(maestro.plan.path)]
    config.pluginmanager.register(MaestroSession(config, maestro), "maestro-session")
    progress.register(config, maestro)
    if config.pluginmanager.hasplugin("xdist"):
        from .hooks import xdist_hooks

        config.pluginmanager.register(xdist_hooks, "maestro-xdist")
        xdist_hooks.check_options(config, maestro)


def remote_worker(config: pytest.Config, role: Role) -> Orchestrator | None:
    """A remote worker's run, its plan, settings and agents the controller's (see
    ``hooks/remote.py``); None in any other process."""
    from .run.orchestrator import Role

    if role is not Role.WORKER:
        return None
    from .hooks.remote import given_remote, remote_orchestrator
    from .hooks.xdist_hooks import given_plan

    given, plan = given_remote(config), given_plan(config)
    if given is None or plan is None:
        return None
    return remote_orchestrator(config, given, plan, role, runtimes(config))


def local_orchestrator(config: pytest.Config, settings: Settings, role: Role) -> Orchestrator:
    """The run as a process on the controller's file system sees it."""
    from .hooks.session import durations_key
    from .run.orchestrator import Orchestrator, Role

    if role is Role.CONTROLLER or role is Role.WORKER:
        from .hooks.remote import local_isolation, remote_run, start_controller

        if role is Role.CONTROLLER and remote_run(config, settings):
            settings = start_controller(config, settings)
        settings = local_isolation(config, settings)
    graph = plan_graph(config, settings, role)
    plan = graph.plan
    root = project_root(config, settings.root, plan.root, plan.path)
    state_dir_inside(root, settings.state_dir)
    report_allowed(
        config.invocation_params.dir, settings.report, root, settings.state_dir, plan.path
    )
    return Orchestrator(
        settings,
        graph,
        root,
        agent_dirs=agent_dirs(config, settings, plan.path, root),
        role=role,
        runtimes=runtimes(config),
        durations=cached_durations(config, durations_key(plan.path.resolve()))
        if role.decides
        else {},
    )


def plan_graph(config: pytest.Config, settings: Settings, role: Role) -> PlanGraph:
    """The plan's graph: an xdist worker's from the plan its controller read and handed it (see
    ``plan/wire.py``), any other process's from the plan file."""
    from .plan import load_graph
    from .plan.graph import PlanGraph
    from .run.orchestrator import Role

    if role is Role.WORKER:
        from .hooks.xdist_hooks import given_plan

        given = given_plan(config)
        if given is not None:
            return PlanGraph(given)
    return load_graph(settings.plan, settings.format, settings.tag)


def process_role(config: pytest.Config) -> Role:
    """Which process of the run this is: an xdist worker is given ``workerinput``; the
    controller is the process xdist distributes from (``--dist``, which ``-n N`` sets; not with
    ``--collect-only``, as xdist decides itself)."""
    from .run.orchestrator import Role

    if hasattr(config, "workerinput"):
        return Role.WORKER
    if config.getoption("dist", "no") != "no" and not config.option.collectonly:
        return Role.CONTROLLER
    return Role.SOLE


def phase_node_ids(args: list[str], plan: Path) -> list[str]:
    """The arguments that name phases of the plan by node id."""
    from .hooks.nodeids import NodeId

    target = plan.resolve()
    return [
        arg
        for arg in args
        if (node := NodeId.parse(arg)) is not None and Path(node.file).resolve() == target
    ]


def agent_dirs(config: pytest.Config, settings: Settings, plan: Path, root: Path) -> list[Path]:
    """Where agent definitions are looked for, first found first (see agents.py)."""
    explicit = []
    if settings.agents_dir:
        explicit.append(config.invocation_params.dir / settings.agents_dir)
    return [
        *explicit,
        plan.parent / "agents",
        root / "agents",
        config.rootpath / "agents",
        root / ".claude" / "agents",
        Path.home() / ".claude" / "agents",
    ]


def cached_durations(config: pytest.Config, key: str) -> dict[str, float]:
    """Seconds each phase took when it last completed, from pytest's cache; a value that is not
    a duration (the cache is a file anyone may edit) is left out, as if never measured."""
    cache = getattr(config, "cache", None)
    found = cache.get(key, {}) if cache is not None else {}
    if not isinstance(found, dict):
        return {}
    durations = {}
    for phase_id, value in found.items():
        try:
            durations[str(phase_id)] = float(numbers.ESTIMATE.check(value))
        except numbers.NumberError:
            continue
    return durations


# What this tool writes in its state dir: sessions, journals, locks, ledgers, the account's call
# slots, their temporary files, and its directories.
STATE_FILE = re.compile(
    r"\.gitignore|logs|archive|preimages|replaced|worktrees|kept"
    r"|\.?.+-[0-9a-f]{8}\.(md|journal|lock|info|spend|base)(\..+\.tmp|\.tmp)?"
    r"|\.?summary\.json(\..+\.tmp)?"
    r"|\.?pacing\.json(\.lock|\..+\.tmp)?"
)


def state_dir_inside(root: Path, state_dir: str) -> None:
    """The session state belongs to the project, in a directory of its own: refuse a state dir
    that leaves the root, is the root, or already holds files this tool did not write (it
    archives and restores files there: it must never take the user's for its own)."""
    from .state.paths import FOLDERS

    if not state_dir.isprintable():  # a newline in it would split every line that names it
        raise SettingsError(f"state dir {state_dir!r} holds a control character: name it plainly")
    resolved = (root / state_dir).resolve()
    if not resolved.is_relative_to(root):
        raise SettingsError(
            f"state dir {state_dir!r} resolves to {resolved}, outside the project root {root}"
        )
    if resolved == root:
        raise SettingsError(f"state dir {state_dir!r} is the project root: name a directory in it")
    try:
        entries = list(os.scandir(resolved))
        # In its folders it writes files by name too (a phase's log, pre-images, a worktree's
        # marker), and in the sessions' worktree folders, whose worktrees are the project's.
        inside = _inside(e for e in entries if e.name in FOLDERS)
        inside += _inside(e for e in inside if Path(e.path).parent.name == "worktrees")
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise SettingsError(f"state dir {resolved}: {exc.strerror}") from None
    foreign = sorted(e.name for e in entries if not STATE_FILE.fullmatch(e.name))
    if foreign:
        raise SettingsError(
            f"state dir {resolved} already holds files this tool did not write "
            f"({_some(foreign)}): name a directory of its own"
        )
    # Its own files are written where they are: a link in their place would have them written
    # through it, over whatever it leads to (a journal emptied, a log over a file of the user's).
    links = sorted(e.name for e in entries if e.is_symlink())
    links += sorted(os.path.relpath(e.path, resolved) for e in inside if e.is_symlink())
    if links:
        raise SettingsError(
            f"state dir {resolved} holds symbolic links this tool did not make ({_some(links)}):"
            " it writes its own files there, never through a link; remove them"
        )


def _inside(folders: Iterable[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
    """What the folders hold; a link to a folder is not followed."""
    return [
        entry
        for folder in folders
        if folder.is_dir(follow_symlinks=False)
        for entry in os.scandir(folder.path)
    ]


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", …" if len(names) > 3 else "")


def report_allowed(cwd: Path, report: str | None, root: Path, state_dir: str, plan: Path) -> None:
    """The state dir holds only what this tool writes: a report there would make the next run
    refuse the directory, so it is refused now. Nor may the report replace the plan or a file
    of the user's (see ``outputs.report_refusal``)."""
    if not report:
        return
    from .views.outputs import report_refusal

    if (cwd / report).resolve().is_relative_to((root / state_dir).resolve()):
        raise SettingsError(
            f"--maestro-report {report} is inside the state dir {state_dir}, which holds "
            "only the session's own files: write the report elsewhere"
        )
    why = report_refusal(cwd / report, plan)
    if why is not None:
        raise SettingsError(f"--maestro-report {report} {why}: write the report elsewhere")


# What marks the top of a project, as pytest's own rootdir search knows it, plus git.
PROJECT_MARKERS = (".git", "pyproject.toml", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg")


def project_root(
    config: pytest.Config,
    option: str | None,
    declared: str | None,
    plan: Path,
    *,
    create: bool = True,
) -> Path:
    """``--maestro-root`` (or its ini key), else the plan's ``root:`` (relative to the plan's real
    path), else pytest's rootdir when ``--rootdir`` names it or the plan lies inside it, else the
    plan's nearest ancestor that looks like a project top: the same root, and so the same
    session, wherever pytest starts and however the plan is named.

    An explicit option beats the plan so that one plan can be run against another checkout; it
    must exist (a typo must not become a new directory). A plan's own ``root:`` is created when
    missing (unless not ``create``): example plans work in a scratch directory.
    """
    if option:
        root = Path(option)
        root = root if root.is_absolute() else config.invocation_params.dir / root
        if not root.is_dir():
            raise SettingsError(f"project root {root} (--maestro-root) is not a directory")
    elif declared:
        # From the plan's real folder, as its session key is: one plan, one root and one
        # session, whether it is reached through a link from elsewhere or not.
        root = plan.resolve().parent / declared
    elif config.option.rootdir or plan.resolve().is_relative_to(config.rootpath.resolve()):
        root = config.rootpath
    else:
        real = plan.resolve()
        root = next(
            (d for d in real.parents if any((d / m).exists() for m in PROJECT_MARKERS)),
            real.parent,
        )
    root = root.resolve()
    if not create:
        return root
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"project root {root}: {exc.strerror}") from None
    return root
