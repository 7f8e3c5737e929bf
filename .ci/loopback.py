"""Run a command with the loopback interface up: ``unshare -n python .ci/loopback.py CMD...`` as
root, else ``unshare -rn …`` (a user namespace too, in which root is the only user).

A new network namespace has only ``lo``, and down: this brings it up (no ``ip`` needed), so the
conformance suite's fake model APIs on 127.0.0.1 are reachable and nothing else is.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


if __name__ == "__main__":
    loopback_up()
    os.execvp(sys.argv[1], sys.argv[1:])
