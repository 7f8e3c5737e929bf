"""The loopback sshd the remote tests use: xdist's workers reach it over ssh, only its key gets
in, and a stopped server leaves nothing running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .sshd import Sshd, Unavailable, _alive, _descendants

# Each test proves where it runs: in a process started by the server (pid SSHD), for a login
# through it (SSH_CONNECTION names its port), in the folder the spec's chdir= names.
THROUGH_SSH = """
import os
from pathlib import Path


def ancestors():
    pid = os.getpid()
    while pid > 1:
        pid = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
        yield pid


def test_started_by_the_server():
    assert {sshd_pid} in set(ancestors())
    assert os.environ["SSH_CONNECTION"].split()[-1] == "{port}"


def test_in_the_folder_sent():
    assert Path.cwd() == Path({chdir!r})
"""

# On the controller: each worker's platform information and spec, as xdist has them.
GATEWAYS = """
import json
from pathlib import Path

SEEN = {}


def pytest_testnodeready(node):
    info, spec = node.workerinfo, node.gateway.spec
    SEEN[node.gateway.id] = {
        "executable": info["executable"],
        "cwd": info["cwd"],
        "ssh": spec.ssh,
        "ssh_config": spec.ssh_config,
    }
    Path("gateways.json").write_text(json.dumps(SEEN))
"""


@pytest.mark.slow
def test_xdist_workers_come_through_the_loopback_sshd(
    pytester: pytest.Pytester, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The controller is no login: only a worker can pass the tests.
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    pytester.makeconftest(GATEWAYS)
    pytester.makepyfile(
        test_remote=THROUGH_SSH.format(
            sshd_pid=sshd.process.pid, port=sshd.port, chdir=str(pytester.path)
        )
    )
    # Two ways in: execnet passes the spec's ssh_config itself (gw0); a spec without one runs
    # the `ssh` first on PATH (gw1). --dist each runs both tests on both.
    monkeypatch.setenv("PATH", f"{sshd.bin}{os.pathsep}{os.environ['PATH']}")
    first = sshd.spec(sys.executable, chdir=pytester.path)
    second = f"ssh={sshd.host}//python={sys.executable}//chdir={pytester.path}"
    result = pytester.runpytest("-p", "xdist", "--tx", first, "--tx", second, "--dist", "each")
    result.assert_outcomes(passed=4)
    # What xdist knows of each gateway, as the worker told the controller.
    gateways = json.loads((pytester.path / "gateways.json").read_text())
    assert sorted(gateways) == ["gw0", "gw1"]
    for info in gateways.values():
        assert info["ssh"] == sshd.host
        assert (info["executable"], info["cwd"]) == (sys.executable, str(pytester.path))
    assert [gateways[gw]["ssh_config"] for gw in ("gw0", "gw1")] == [str(sshd.config), None]


def test_only_the_servers_client_key_gets_in(sshd: Sshd, tmp_path: Path) -> None:
    assert sshd.ssh("echo", "in").stdout == "in\n"
    # The same client configuration with another key: refused, and no password is asked.
    other = tmp_path / "other_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
        check=True,
        capture_output=True,
    )
    config = tmp_path / "ssh_config"
    config.write_text(
        sshd.config.read_text().replace(str(sshd.folder / "client_ed25519"), str(other))
    )
    refused = subprocess.run(
        ["ssh", "-F", str(config), sshd.host, "true"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    assert refused.returncode == 255
    assert "Permission denied (publickey)" in refused.stderr


def test_a_stopped_server_leaves_nothing_running(tmp_path: Path) -> None:
    try:
        server = Sshd.start(tmp_path / "sshd")
    except Unavailable as error:
        pytest.skip(str(error))
    try:
        client = subprocess.Popen(
            ["ssh", "-F", str(server.config), server.host, "sleep 60"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        login: list[int] = []
        while not any(_runs_sleep(pid) for pid in login) and time.monotonic() < deadline:
            time.sleep(0.02)
            login = _descendants(server.process.pid)
        assert any(_runs_sleep(pid) for pid in login), "the login's command never started"
    finally:
        server.stop()
    assert server.process.returncode is not None
    assert not [pid for pid in login if _alive(pid)]
    assert client.wait(timeout=30) == 255  # its connection went with the server


def _runs_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == b"sleep"
    except OSError:
        return False
