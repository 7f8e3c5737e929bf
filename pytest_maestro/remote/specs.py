"""Which xdist workers are remote, and the command line such a worker can be given.

A ``--tx`` spec names a gateway in execnet's spelling: parts joined by ``//``, each ``key=value``
or a word (``popen``). One with ``ssh=``, ``socket=``, ``vagrant_ssh=`` or ``chdir=`` puts its
worker in another directory or on another host: its file system is not the controller's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from . import RemoteError

# The keys that take a worker away from the controller's directory or machine.
REMOTE_KEYS = ("ssh", "socket", "vagrant_ssh", "chdir")
# pytest's short options that take a value (a short flag before a path leaves it to collect).
SHORT_VALUES = ("-c", "-k", "-m", "-p", "-o", "-W", "-r", "-n")


def is_remote(spec: str) -> bool:
    """Whether a ``--tx`` spec (``3*ssh=host//python=python3``) names a remote worker."""
    body = spec.split("*", 1)[1] if spec.split("*", 1)[0].isdigit() else spec
    return any(part.split("=", 1)[0] in REMOTE_KEYS for part in body.split("//") if "=" in part)


def any_remote(specs: Iterable[str]) -> bool:
    return any(is_remote(spec) for spec in specs)


def worker_arguments(
    args: Sequence[str],
    exists: Callable[[str], bool],
    value_options: Collection[str],
    long_flags: Collection[str],
) -> list[str]:
    """The controller's arguments as a remote worker may be given them.

    xdist hands a remote worker the controller's arguments, and refuses to start one when an
    argument names a path that exists here (it would have to be synced, which xdist no longer
    does). Such a path is the value of an option (``--maestro plan.md``: written
    ``--maestro=plan.md``, which argparse reads the same), or an argument to collect (a phase's
    node id, the plan: left out, since the worker collects the plan and selection it is given).
    After a long option not known either way it is refused in one line. ``exists``: whether an
    argument names a path here, as xdist sees it (a node id by its file); ``value_options`` and
    ``long_flags``: the long options known to take a value, and to take none.
    """
    out: list[str] = []
    for arg in args:
        if not exists(arg):
            out.append(arg)
            continue
        previous = out[-1] if out else ""
        if previous in value_options:
            out[-1] = f"{previous}={arg}"
        elif previous in SHORT_VALUES:
            out[-1] = f"{previous}{arg}"  # argparse reads -cFILE as -c FILE
        elif not previous.startswith("--") or "=" in previous or previous in long_flags:
            continue  # to collect: the worker collects the plan it is given
        else:
            raise RemoteError(
                f"argument {arg!r} after {previous} names a path on this machine, which a worker "
                f"on another (--tx) cannot be given: write {previous}={arg} if it is the "
                "option's value"
            )
    return out


def expand(specs: Iterable[str]) -> list[str]:
    """The ``--tx`` specs one per worker, in the order xdist starts them (``3*popen`` thrice):
    the count read as xdist reads it (``int``), so that the names line up with its workers."""
    out: list[str] = []
    for spec in specs:
        count, star, body = spec.partition("*")
        try:
            number = int(count) if star else None
        except ValueError:  # no count (xdist starts the spec as it is written)
            number = None
        out += [spec] if number is None else [body] * number
    return out


def gateway_ids(specs: Sequence[str]) -> list[str]:
    """Each worker's gateway id, as execnet gives them: a spec's ``id=``, else gw0, gw1, … in
    order among the specs without one."""
    ids, counter = [], 0
    for spec in specs:
        named = dict(part.split("=", 1) for part in spec.split("//") if "=" in part).get("id")
        if named is None:
            named, counter = f"gw{counter}", counter + 1
        ids.append(named)
    return ids


def names_worker(key: str, worker: str, spec: str) -> bool:
    """Whether ``key`` of ``--maestro-worker-runtimes`` names this worker: its gateway id, or
    parts of its spec (``ssh=me@build1``, ``popen//chdir=/srv/a``)."""
    parts = set(spec.split("//"))
    return key == worker or set(key.split("//")) <= parts
