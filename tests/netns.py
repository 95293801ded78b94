"""Network namespaces and veth pairs for tests, always cleaned up.

Integration tests need real interfaces, but must never touch the machine's own network
nor leave anything behind: every name created here carries a per-process unique tag,
and ``Netns`` deletes exactly what it created -- on normal exit, on failure, and on
KeyboardInterrupt -- like ``mn -c`` limited to this test's own objects.

A socket keeps the namespace it was created in, so ``Netns.socket()`` lets the test
process send and receive inside a namespace without spawning a helper process.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import socket
import struct
import subprocess
import time
from contextlib import contextmanager
from typing import Callable, Iterator

ETH_P_ALL = 0x0003
CLONE_NEWNET = 0x40000000
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
SO_TIMESTAMPNS = 35
_counter = itertools.count()
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def unique_tag() -> str:
    """A short tag (process id + counter) that keeps names of parallel tests apart."""
    return f"{os.getpid() % 100000:x}{next(_counter):x}"


class Netns:
    """A set of network namespaces and veth pairs created for one test.

    Use as a context manager; ``add_ns('h1')`` creates a namespace and returns its real
    (unique) name, ``add_link('sw', 'h1')`` a veth pair between two of them. Interface
    names are short (Linux allows 15 characters) and returned to the caller.
    """

    def __init__(self) -> None:
        self.tag = unique_tag()
        self.namespaces: dict[str, str] = {}

    def __enter__(self) -> "Netns":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def name(self, short: str) -> str:
        """The real name of the namespace called ``short`` in this test."""
        return self.namespaces[short]

    def add_ns(self, short: str) -> str:
        real = f"p4t{self.tag}{short}"
        _ip("netns", "add", real)
        self.namespaces[short] = real
        self.run(short, "ip", "link", "set", "lo", "up")
        # Hosts' IPv6 autoconfiguration (router solicitations, DAD) would add
        # unrelated frames to every capture.
        self.run(short, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self.run(short, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        return real

    def add_link(self, ns_a: str, ns_b: str, mtu: int = 1500) -> tuple[str, str]:
        """Create a veth pair with one end in each namespace; returns (iface_a, iface_b)."""
        n = next(_counter)
        if_a, if_b = f"v{self.tag}{n:x}a", f"v{self.tag}{n:x}b"
        if len(if_a) > 15:
            raise ValueError(f"interface name {if_a!r} longer than 15 characters")
        # Created directly inside namespace a, so nothing ever lives in the root namespace.
        _ip("-n", self.name(ns_a), "link", "add", if_a, "type", "veth",
            "peer", "name", if_b, "netns", self.name(ns_b))
        for ns, iface in ((ns_a, if_a), (ns_b, if_b)):
            self.run(ns, "ip", "link", "set", iface, "mtu", str(mtu), "up")
        return if_a, if_b

    def run(self, short: str, *cmd: str) -> subprocess.CompletedProcess:
        """Run a command inside a namespace; raises with its stderr on failure."""
        return subprocess.run(["ip", "netns", "exec", self.name(short), *cmd],
                              check=True, capture_output=True, text=True)

    def exec_prefix(self, short: str) -> list[str]:
        """The argv prefix that starts a process inside namespace ``short``."""
        return ["ip", "netns", "exec", self.name(short)]

    @contextmanager
    def entered(self, short: str) -> Iterator[None]:
        """Move the calling thread into a namespace for the duration of the block."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/var/run/netns/{self.name(short)}", os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(target)
            os.close(own)

    def socket(self, short: str, iface: str) -> socket.socket:
        """A raw AF_PACKET socket bound to ``iface`` inside namespace ``short``.

        It receives only frames arriving on ``iface``, not those the namespace sends.
        """
        with self.entered(short):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            sock.bind((iface, ETH_P_ALL))
        return sock

    def cleanup(self) -> None:
        """Delete every namespace this object created (their veths go with them)."""
        for real in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", real], capture_output=True)
        self.namespaces.clear()


def receive(sock: socket.socket, count: int, timeout: float,
            keep: Callable[[bytes], bool]) -> list[tuple[float, bytes]]:
    """Frames from a ``Netns.socket`` accepted by ``keep``, until ``count`` or ``timeout``.

    Each comes with its arrival time as the kernel stamped it (seconds), so rates
    measured from these times do not depend on when the test process got to run.
    """
    got: list[tuple[float, bytes]] = []
    end = time.monotonic() + timeout
    while len(got) < count:
        left = end - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            data, anc, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(16))
        except TimeoutError:
            break
        if keep(data):
            stamp = next(struct.unpack("qq", d[:16]) for level, kind, d in anc
                         if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS)
            got.append((stamp[0] + stamp[1] / 1e9, data))
    return got


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")
