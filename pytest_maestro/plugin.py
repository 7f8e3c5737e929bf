"""pytest entry point: options and wiring only. Dormant until ``--maestro PLAN`` is given."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .analysis import FORMATS as ANALYZE_FORMATS
from .plan import PlanError, load_plan
from .settings import OPTIONS, Settings, SettingsError

PLAN_HELP = "run the phases of this implementation plan as test items"
ANALYZE_HELP = (
    "print the plan's waves, chunks and critical path (text, json or mermaid); run nothing"
)


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
    for option in OPTIONS:
        help_text = option.help
        if option.default not in (None, False):
            numeric = option.kind in ("int", "float")
            shown = format(option.default, "g") if numeric else option.default
            help_text += f" (default: {shown})"
        if option.env:
            unit = " in minutes" if option.env_scale == 60 else ""
            help_text += f" [env {option.env}{unit}]"
        if option.kind == "bool":
            group.addoption(
                option.flag, action="store_true", default=False, dest=option.ini, help=help_text
            )
        else:
            group.addoption(
                option.flag,
                dest=option.ini,
                default=None,
                type={"int": int, "float": float}.get(option.kind, str),
                choices=option.choices or None,
                help=help_text,
            )
        parser.addini(option.ini, help_text, type="string", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--maestro-analyze`` prints the analysis and ends the run before any collection."""
    if not config.getoption("maestro") or not config.getoption("maestro_analyze"):
        return None
    from .analysis import render

    try:
        settings = Settings.from_config(config)
        plan = load_plan(settings.plan, settings.format)
    except (PlanError, SettingsError) as exc:
        sys.stderr.write(f"ERROR: {exc}\n")
        return pytest.ExitCode.USAGE_ERROR
    sys.stdout.write(render(plan, settings.analyze or "text").rstrip("\n") + "\n")
    return pytest.ExitCode.OK


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("maestro"):
        return
    from .collect import SESSION_KEY
    from .session import MaestroSession

    try:
        settings = Settings.from_config(config)
        plan = load_plan(settings.plan, settings.format)
        root = project_root(config, settings.root, plan.root, plan.path)
        state_dir_inside(root, settings.state_dir)
    except (PlanError, SettingsError) as exc:
        raise pytest.UsageError(str(exc)) from None
    session = MaestroSession(config, settings, plan, root)
    config.stash[SESSION_KEY] = session
    for line in session.marker_lines():
        config.addinivalue_line("markers", line)
    # Collect the plan and nothing else, whatever testpaths or arguments say.
    config.args = [str(plan.path)]
    config.pluginmanager.register(session, "maestro-session")
    if config.pluginmanager.hasplugin("xdist"):
        from . import xdist_hooks

        config.pluginmanager.register(xdist_hooks, "maestro-xdist")


def state_dir_inside(root: Path, state_dir: str) -> None:
    """The session state belongs to the project: refuse a state dir that leaves its root."""
    resolved = (root / state_dir).resolve()
    if not resolved.is_relative_to(root):
        raise SettingsError(
            f"state dir {state_dir!r} resolves to {resolved}, outside the project root {root}"
        )


def project_root(
    config: pytest.Config, option: str | None, declared: str | None, plan: Path
) -> Path:
    """``--maestro-root`` (or its ini key), else the plan's ``root:``, else pytest's rootdir.

    An explicit option beats the plan so that one plan can be run against another checkout.
    Created when missing: example plans work in a scratch directory.
    """
    if option:
        root = Path(option)
        root = root if root.is_absolute() else config.invocation_params.dir / root
    elif declared:
        root = plan.parent / declared
    else:
        root = config.rootpath
    root = root.resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"project root {root}: {exc.strerror}") from None
    return root
