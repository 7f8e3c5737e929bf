"""The pytest side of remote phases: which workers are remote, what they are handed at their
start, and a remote worker's view of the run. See docs/architecture.md, "Remote phases".

The controller decides at its start, from the ``--tx`` specs (``--maestro-remote`` makes every
worker remote): a run with a remote worker isolates every phase, since results from elsewhere
come back only by a merge. Each remote worker is handed, in ``workerinput``, a side channel on
its gateway (the phases' starts go there), the settings, the plan file's bytes and where pytest
names it, the session's name and the selection. xdist's own commands carry nothing else.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._compat import WorkerController
from ..plan import Plan
from ..remote import RemoteError
from ..remote.specs import REMOTE_KEYS, any_remote, worker_arguments
from ..runtimes import Runtime
from ..settings import OPTIONS, Settings, SettingsError
from .nodeids import NodeId

if TYPE_CHECKING:
    from ..run.orchestrator import Orchestrator, Role

REMOTE_INPUT = "maestro_remote"
# Every worker's channel, by worker id, on the controller of a run with remote workers.
CHANNELS = pytest.StashKey[dict[str, Any]]()
# The long options of pytest that take a value, besides this plugin's: a path given as one is
# joined to it (``--rootdir=DIR``) in the arguments a remote worker gets.
PYTEST_VALUES = (
    "--rootdir",
    "--config-file",
    "--confcutdir",
    "--basetemp",
    "--junitxml",
    "--junit-xml",
    "--deselect",
    "--ignore",
    "--ignore-glob",
    "--log-file",
    "--override-ini",
    "--tx",
    "--dist",
    "--numprocesses",
)


def remote_run(config: pytest.Config, settings: Settings) -> bool:
    """On the controller: whether some worker is remote."""
    return settings.remote or any_remote(config.getoption("tx", None) or ())


def start_controller(config: pytest.Config, settings: Settings) -> Settings:
    """On the controller of a run with remote workers: the arguments xdist hands them made
    acceptable to it (``worker_arguments``), every phase isolated, and a place for the
    channels. SettingsError, one line, for an argument that cannot go."""
    values = [option.flag for option in OPTIONS if option.kind != "bool"]
    flags = [option.flag for option in OPTIONS if option.kind == "bool"]
    params = config.invocation_params
    cwd = params.dir

    def exists(arg: str) -> bool:  # as xdist looks: a node id by its file, from here
        node = NodeId.parse(arg)
        try:
            return (cwd / (node.file if node else arg)).exists()
        except (OSError, ValueError):
            return False

    try:
        args = worker_arguments(
            params.args, exists, ("--maestro", *values, *PYTEST_VALUES), ("--maestro-fresh", *flags)
        )
    except RemoteError as exc:
        raise SettingsError(str(exc)) from None
    config.invocation_params = dataclasses.replace(params, args=tuple(args))
    config.stash[CHANNELS] = {}
    return dataclasses.replace(settings, isolate="worktree")


def is_remote_node(node: WorkerController, settings: Settings) -> bool:
    spec = node.gateway.spec
    return settings.remote or any(getattr(spec, key, None) for key in REMOTE_KEYS)


def remote_input(
    node: WorkerController,
    settings: Settings,
    plan: Plan,
    session: str,
    root: Path,
    maestro_dirs: list[Path],
) -> dict[str, Any]:
    """What a remote worker is handed at its start, a side channel on its gateway among it."""
    config = node.config
    channel = node.gateway.newchannel()
    config.stash[CHANNELS][node.gateway.id] = channel
    real = plan.path.resolve()
    try:
        nodepath = real.relative_to(config.rootpath.resolve()).as_posix()
    except ValueError:
        nodepath = real.name  # outside pytest's rootdir: the worker names it by its name
    selection = [
        node_id.name
        for arg in config.args
        if (node_id := NodeId.parse(arg)) is not None and Path(node_id.file).resolve() == real
    ]
    return {
        "channel": channel,
        "agents": agent_files(maestro_dirs),
        "settings": dataclasses.replace(settings, isolate="none").to_wire(),
        "plan_bytes": plan_bytes(real),
        "plan_node": nodepath,
        "session": session,
        "root": str(root),
        "selection": selection,
    }


def agent_files(directories: list[Path]) -> list[tuple[int, str, bytes]]:
    """The agent definitions this machine would read, each with the place of its directory in
    the search: a remote worker reads them in the same order, from its own copies."""
    found = []
    for place, directory in enumerate(directories):
        try:
            paths = sorted(directory.glob("*.md")) if directory.is_dir() else []
            found += [(place, path.name, path.read_bytes()) for path in paths if path.is_file()]
        except OSError:
            continue  # unreadable here: the controller's own reading says so
    return found


def given_agents(home: Path, given: dict[str, Any]) -> list[Path]:
    """The agent definitions the controller handed over, written under ``home``; the
    directories to search, in the controller's order."""
    directories: dict[int, Path] = {}
    for place, name, data in given["agents"]:
        directory = directories.setdefault(int(place), home / "agents" / str(int(place)))
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / Path(str(name)).name).write_bytes(data)
        except OSError as exc:
            raise pytest.UsageError(f"cannot write agent definitions in {home}: {exc}") from None
    return [directories[place] for place in sorted(directories)]


def remote_orchestrator(
    config: pytest.Config,
    given: dict[str, Any],
    plan: Plan,
    role: Role,
    runtimes: Mapping[str, Runtime],
) -> Orchestrator:
    """The run as a remote worker sees it: the controller's settings, plan and agent
    definitions, the plan file where pytest names it, and a directory of its own on its host."""
    from ..plan.graph import PlanGraph
    from ..remote.home import Home
    from ..remote.worker import RemoteWorker, home_for
    from ..run.orchestrator import Orchestrator

    settings = Settings.from_wire(given["settings"])
    path = mirror_plan(config, given)
    home = home_for(Path.cwd(), Path(given["root"]), given["session"], worker_id(config))
    remote = RemoteWorker(Home(home), channel_receiver(given))
    remote.prepare()  # what an earlier run left there goes
    config.args = selected(path, given)
    return Orchestrator(
        settings,
        PlanGraph(dataclasses.replace(plan, path=path)),
        home,
        agent_dirs=given_agents(home, given),  # the controller's, in its order
        role=role,
        runtimes=runtimes,
        remote=remote,
    )


def plan_bytes(path: Path) -> bytes:
    """The plan file as it is now, for the worker to name; empty if it went since it was read
    (the worker runs the plan it is given, whatever the file holds)."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def given_remote(config: pytest.Config) -> dict[str, Any] | None:
    """On a remote worker, what its controller handed it; None elsewhere."""
    given = getattr(config, "workerinput", {}).get(REMOTE_INPUT)
    return given if isinstance(given, dict) else None


def mirror_plan(config: pytest.Config, given: dict[str, Any]) -> Path:
    """The plan file where this worker's pytest names it as the controller's does (its node ids
    must match): written there from the bytes it was handed, unless a file is there already (a
    worker on the controller's machine: the user's own)."""
    path = config.rootpath / str(given["plan_node"])
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(given["plan_bytes"])
        except OSError as exc:
            raise pytest.UsageError(f"cannot write the plan at {path}: {exc.strerror}") from None
    return path


def selected(path: Path, given: dict[str, Any]) -> list[str]:
    """The worker's arguments: the plan, or the phases the controller's arguments named."""
    names = given["selection"]
    return [str(NodeId(str(path), name)) for name in names] or [str(path)]


def channel_receiver(given: dict[str, Any]) -> Any:
    """A function that waits for the next message on the side channel."""
    channel = given["channel"]

    def receive(timeout: float) -> object:
        return channel.receive(timeout)

    return receive


ISOLATE_INPUT = "maestro_isolate"  # a local worker of a run with remote ones: it isolates too


def local_isolation(config: pytest.Config, settings: Settings) -> Settings:
    """On a local worker of a run with remote workers: its phases isolated, as theirs are."""
    wanted = getattr(config, "workerinput", {}).get(ISOLATE_INPUT)
    return dataclasses.replace(settings, isolate=wanted) if wanted else settings


def worker_id(config: pytest.Config) -> str:
    return str(getattr(config, "workerinput", {}).get("workerid", f"w{os.getpid()}"))
