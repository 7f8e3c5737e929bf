"""Phases on other hosts, on one machine: a real sshd on the loopback (``sshd``), which xdist's
``--tx ssh=…`` reaches through the client configuration it comes with.

``.ci/run`` installs openssh-server and openssh-client where apt works; elsewhere, or where the
server cannot start (cannot bind, a login refused), the tests that use ``sshd`` are skipped with
the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .sshd import Sshd, Unavailable


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory, _bytecode_cache: Path) -> Iterator[Sshd]:
    """One sshd on 127.0.0.1 for the session (of this xdist worker), ended at its end.

    A login shares the bytecode cache of every process the tests start (``SetEnv``): its Python
    neither compiles every module again nor writes caches beside the modules it imports.
    """
    try:
        server = Sshd.start(
            tmp_path_factory.mktemp("sshd"), {"PYTHONPYCACHEPREFIX": str(_bytecode_cache)}
        )
    except Unavailable as error:
        pytest.skip(str(error))
    try:
        yield server
    finally:
        server.stop()
