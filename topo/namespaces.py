"""Network namespaces for tests and benchmarks, and raw sockets opened inside them.

Tests and benchmarks send and capture frames inside Mininet hosts (a namespace held
by the host's shell process) and in namespaces of their own (`Netns`). A socket keeps
the namespace it was created in, so the calling thread enters the namespace
(setns(2)) only to create the socket and leaves at once: no helper process, no
``mnexec``. Needs root (CAP_SYS_ADMIN for setns, CAP_NET_RAW for the socket).

`Netns` must never touch the machine's own network nor leave anything behind: every
name it creates carries a per-process unique tag, and it deletes exactly what it
created -- on normal exit, on failure, and on KeyboardInterrupt -- like ``mn -c``
limited to its own objects.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import socket
import subprocess
from contextlib import contextmanager
from typing import Iterator, Sequence

CLONE_NEWNET = 0x40000000   # setns(2): the file must be a network namespace
ETH_P_ALL = 0x0003          # every protocol: the socket sees each frame on its interface
SOL_PACKET = 263            # Linux values; Python's socket module lacks these names
PACKET_IGNORE_OUTGOING = 23
SO_TIMESTAMPNS = 35
_libc = ctypes.CDLL(None, use_errno=True)
_counter = itertools.count()


def named_netns(name: str) -> str:
    """The file of the namespace ``ip netns add <name>`` created."""
    return f"/var/run/netns/{name}"


def process_netns(pid: int) -> str:
    """The file of the network namespace process ``pid`` runs in (a Mininet host's
    shell: ``fabric.host(name).pid``)."""
    return f"/proc/{pid}/ns/net"


def enter_for_good(ns_file: str) -> None:
    """Move the calling thread into the network namespace ``ns_file`` and leave it
    there: a process just forked to run in it stays (tccl/spawner.py, as ``mnexec -a``
    before it executes a command); `entered` brings the thread back after a block."""
    target = os.open(ns_file, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target, ns_file)
    finally:
        os.close(target)


@contextmanager
def entered(ns_file: str) -> Iterator[None]:
    """Move the calling thread into the network namespace ``ns_file`` for the block,
    and back into its own afterwards (also on an exception)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter_for_good(ns_file)
        try:
            yield
        finally:
            _setns(own, "this thread's own namespace")
    finally:
        os.close(own)


def packet_socket(ns_file: str, iface: str,
                  options: Sequence[tuple[int, int, int]] = ()) -> socket.socket:
    """A raw AF_PACKET socket on ``iface`` inside the namespace ``ns_file``; each
    (level, name, value) of ``options`` is set before the socket is bound."""
    with entered(ns_file):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            for level, name, value in options:
                sock.setsockopt(level, name, value)
            sock.bind((iface, ETH_P_ALL))
        except BaseException:
            sock.close()
            raise
    return sock


@contextmanager
def host_socket(pid: int, iface: str) -> Iterator[socket.socket]:
    """A raw packet socket on ``iface`` of the network namespace of process ``pid``,
    closed when the block ends."""
    sock = packet_socket(process_netns(pid), iface)
    try:
        yield sock
    finally:
        sock.close()


def unique_tag() -> str:
    """A short tag (process id + counter) that keeps names of parallel users apart."""
    return f"{os.getpid() % 100000:x}{next(_counter):x}"


class Netns:
    """A set of network namespaces and veth pairs created for one test or benchmark.

    Use as a context manager; ``add_ns('h1')`` creates a namespace and returns its real
    (unique) name, ``add_link('sw', 'h1')`` a veth pair between two of them. Interface
    names are short (Linux allows 15 characters) and returned to the caller.
    """

    def __init__(self) -> None:
        self.tag = unique_tag()
        self.namespaces: dict[str, str] = {}
        self.ifaces: dict[str, str] = {}

    def __enter__(self) -> "Netns":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def name(self, short: str) -> str:
        """The real name of the namespace called ``short`` here."""
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

    def add_switch_and_hosts(self, mtu: int = 1500) -> dict[str, str]:
        """Namespaces sw, h1, h2 and veths sw-h1, sw-h2 (the device tests' layout).

        Returns the interfaces, also kept in ``self.ifaces``: s1/h1 are the ends of the
        sw-h1 link (switch port 1), s2/h2 those of sw-h2 (switch port 2)."""
        for ns in ("sw", "h1", "h2"):
            self.add_ns(ns)
        s1, h1 = self.add_link("sw", "h1", mtu=mtu)
        s2, h2 = self.add_link("sw", "h2", mtu=mtu)
        self.ifaces.update(s1=s1, s2=s2, h1=h1, h2=h2)
        return self.ifaces

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
        with entered(named_netns(self.name(short))):
            yield

    def socket(self, short: str, iface: str) -> socket.socket:
        """A raw AF_PACKET socket bound to ``iface`` inside namespace ``short``.

        It receives only frames arriving on ``iface``, not those the namespace sends,
        with the kernel's arrival time (SO_TIMESTAMPNS) and a buffer (8 MiB) that holds
        a burst while the reader is descheduled.
        """
        return packet_socket(named_netns(self.name(short)), iface, options=(
            (SOL_PACKET, PACKET_IGNORE_OUTGOING, 1),
            (socket.SOL_SOCKET, SO_TIMESTAMPNS, 1),
            (socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20),
        ))

    def cleanup(self) -> None:
        """Delete every namespace this object created (their veths go with them)."""
        for real in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", real], capture_output=True)
        self.namespaces.clear()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _setns(fd: int, what: str) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns into {what}: {os.strerror(err)}")
