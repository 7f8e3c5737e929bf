"""A real sshd on the loopback for tests, and an ssh client set up to reach it.

Everything lives in one temporary folder: a throwaway host key, a client key, the
``authorized_keys`` that lets that key in (and nothing else: no password, no keyboard-interactive),
the server's own ``sshd_config`` (the machine's is never read: sshd gets ``-f``), its pid file and
its log, and the client's ``ssh_config`` (ssh gets ``-F``, so neither ``~/.ssh/config`` nor the
machine's is read), whose ``known_hosts`` holds the throwaway host key alone, checked strictly.

execnet runs ``ssh -C [-F <ssh_config>] <ssh spec split on spaces> '<python> -c "…"'``, so an
xdist ``--tx`` reaches the server either way:

- ``ssh_config=<config>//ssh=<host>//python=…``: execnet passes ``-F <config>`` itself
  (``Sshd.spec``);
- ``ssh=<host>//python=…`` with ``Sshd.bin`` first on ``PATH``: an ``ssh`` there adds ``-F``.

``Sshd.host`` is ``127.0.0.1``, whose ``Host`` block in the config names the port, the user and
the key. A login runs the user's shell in the user's home folder, with sshd's environment, not the
test's: a spec's ``chdir=`` sets where the worker runs. For a spec that is not a plain ``popen``,
xdist itself first copies pytest's own source (``pytest.py``, ``_pytest/``) into that folder
(``NodeManager.rsync_roots``), whose worker then imports it from there.

``Sshd.start`` raises ``Unavailable`` with the reason when the server cannot start or a login
fails (no sshd or ssh installed, a port it cannot bind, a locked account); ``Sshd.stop`` ends the
server and every process it started for a login, so a test leaves nothing running.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
# Where sshd and ssh-keygen are when PATH (an ordinary user's) leaves out the sbin folders.
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class Unavailable(Exception):
    """No sshd can serve here; the message says why."""


def _which(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *SBIN])
    return shutil.which(name, path=path)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _keygen(keygen: str, path: Path) -> str:
    """A new ed25519 key pair at ``path`` (private) and ``path.pub``; the public line."""
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", "", "-C", "maestro-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_name(path.name + ".pub").read_text(encoding="utf-8").strip()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, read from /proc (empty where there is none)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = entry.read_text().rsplit(")", 1)[-1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.parent.name))
    return found


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: neither gone nor a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@dataclass
class Sshd:
    """A running sshd on ``HOST:port``, let in by the key of ``config``'s ``Host`` block."""

    folder: Path
    port: int
    config: Path  # the client's ssh_config
    bin: Path  # a folder with an ``ssh`` that uses ``config``
    process: subprocess.Popen[bytes]

    host = HOST

    @property
    def log(self) -> Path:
        return self.folder / "sshd.log"

    def spec(self, python: str, *, chdir: Path | None = None) -> str:
        """An xdist ``--tx`` value for a worker through this server, running ``python``."""
        spec = f"ssh_config={self.config}//ssh={self.host}//python={python}"
        return spec + (f"//chdir={chdir}" if chdir is not None else "")

    def ssh(self, *command: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """``command`` run on the server's side through the client's config."""
        return subprocess.run(
            ["ssh", "-F", str(self.config), self.host, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    @classmethod
    def start(cls, folder: Path, environment: Mapping[str, str] | None = None) -> Sshd:
        """A server with keys and configs made afresh in ``folder`` (an empty folder); a login
        gets ``environment`` (``SetEnv``, no spaces in values) on top of sshd's own."""
        tools = {name: _which(name) for name in ("sshd", "ssh-keygen", "ssh")}
        sshd, keygen, ssh = tools.values()
        if sshd is None or keygen is None or ssh is None:
            missing = ", ".join(name for name, path in tools.items() if path is None)
            raise Unavailable(f"not installed: {missing} (openssh-server, openssh-client)")
        if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
            # sshd run by root wants its privilege separation folder, which the service makes.
            try:
                Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
            except OSError as error:
                raise Unavailable(f"no /run/sshd for sshd as root: {error}") from error
        folder.mkdir(parents=True, exist_ok=True)
        host_key = _keygen(keygen, folder / "host_ed25519")
        client_key = _keygen(keygen, folder / "client_ed25519")
        (folder / "authorized_keys").write_text(client_key + "\n", encoding="utf-8")
        bin_folder = folder / "bin"
        bin_folder.mkdir()
        wrapper = bin_folder / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec {ssh} -F "{folder / "ssh_config"}" "$@"\n')
        wrapper.chmod(0o755)
        failures = []
        for _ in range(3):  # a port found free may be taken before sshd binds it
            port = _free_port()
            config = cls._configure(folder, port, host_key, environment or {})
            with (folder / "sshd.log").open("ab") as log:
                process = subprocess.Popen(
                    [sshd, "-D", "-e", "-f", str(folder / "sshd_config")],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                )
            server = cls(folder, port, config, bin_folder, process)
            failure = server._wait_listening()
            if failure is None:
                login = server.ssh("true")
                if login.returncode == 0:
                    return server
                failure = f"a login failed: {login.stderr.strip() or login.returncode}"
                failure += f"; sshd: {server._last_log_lines()}"
            server.stop()
            failures.append(failure)
            if "bind" not in failure.lower() and "address already in use" not in failure.lower():
                break
        raise Unavailable(f"sshd could not start: {failures[-1]}")

    @staticmethod
    def _configure(folder: Path, port: int, host_key: str, environment: Mapping[str, str]) -> Path:
        """Writes the server's and the client's configuration for ``port``; the client's path."""
        user = getpass.getuser()
        setenv = " ".join(f"{name}={value}" for name, value in environment.items())
        server = f"""\
ListenAddress {HOST}:{port}
HostKey {folder / "host_ed25519"}
PidFile {folder / "sshd.pid"}
AuthorizedKeysFile {folder / "authorized_keys"}
AllowUsers {user}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
StrictModes no
PrintMotd no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitUserEnvironment no
LogLevel INFO
"""
        if setenv:
            server += f"SetEnv {setenv}\n"
        (folder / "sshd_config").write_text(server, encoding="utf-8")
        (folder / "known_hosts").write_text(f"[{HOST}]:{port} {host_key}\n", encoding="utf-8")
        client = f"""\
Host {HOST}
    HostName {HOST}
    Port {port}
    User {user}
    IdentityFile {folder / "client_ed25519"}
    IdentitiesOnly yes
    UserKnownHostsFile {folder / "known_hosts"}
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    ForwardAgent no
    ConnectTimeout 10
    LogLevel ERROR
"""
        path = folder / "ssh_config"
        path.write_text(client, encoding="utf-8")
        return path

    def _wait_listening(self) -> str | None:
        """None once the server says it listens on its port; else why it does not. (A connection
        alone could reach whatever else took the port.)"""
        listening = f"Server listening on {HOST} port {self.port}."
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"sshd exited {self.process.returncode}: {self._last_log_lines()}"
            with contextlib.suppress(OSError):
                if listening in self.log.read_text(errors="replace"):
                    return None
            time.sleep(0.02)
        return f"sshd did not listen within {START_TIMEOUT:g}s: {self._last_log_lines()}"

    def _last_log_lines(self, count: int = 3) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-count:]) or "(empty log)"

    def stop(self) -> None:
        """Ends the server and what it started for logins (each of which leads its own session,
        out of reach of the server's group); waits until none of them runs."""
        ended = [*_descendants(self.process.pid), self.process.pid]
        for pid in ended:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(_alive(pid) for pid in ended) and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in ended:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
