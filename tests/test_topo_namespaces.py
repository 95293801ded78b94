"""topo.freeports and topo.namespaces: free port ranges, and raw sockets opened in
other network namespaces (root) -- the helpers the fabric tests and benchmarks share."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from topo.freeports import free_port_base
from topo.namespaces import Netns, entered, host_socket, named_netns, packet_socket

ETHERTYPE = b"\x88\xb5"  # IEEE local experimental: nothing else on the veth uses it
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def test_free_port_base_gives_a_whole_range_that_binds() -> None:
    base = free_port_base(16)
    socks = []
    try:
        for port in range(base, base + 16):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))  # raises if any port of the range is taken
    finally:
        for s in socks:
            s.close()


def test_free_port_base_skips_a_range_with_a_taken_port() -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    try:
        for _ in range(20):
            base = free_port_base(64)
            assert not base <= taken < base + 64
    finally:
        busy.close()


def test_free_port_base_rejects_an_empty_range() -> None:
    with pytest.raises(ValueError, match="count must be at least 1"):
        free_port_base(0)


def _own_netns() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


@needs_root
def test_frame_sent_from_one_namespace_arrives_in_the_other() -> None:
    before = _own_netns()
    with Netns() as net:
        net.add_ns("a")
        net.add_ns("b")
        if_a, if_b = net.add_link("a", "b")
        # Each interface exists only in its namespace: binding elsewhere would fail.
        with packet_socket(named_netns(net.name("a")), if_a) as tx, \
                packet_socket(named_netns(net.name("b")), if_b) as rx:
            assert _own_netns() == before
            frame = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + ETHERTYPE + b"astral" + bytes(40)
            rx.settimeout(5)
            tx.send(frame)
            while (data := rx.recv(2048))[12:14] != ETHERTYPE:
                pass  # the kernel's own frames (none expected with IPv6 off)
            assert data == frame


@needs_root
def test_entered_returns_to_the_own_namespace_after_an_error() -> None:
    before = _own_netns()
    with Netns() as net:
        net.add_ns("a")
        with pytest.raises(KeyError):
            with entered(named_netns(net.name("a"))):
                raise KeyError("inside")
    assert _own_netns() == before


@needs_root
def test_a_file_that_is_not_a_network_namespace_is_named_in_the_error() -> None:
    with pytest.raises(OSError, match="setns into /proc/self/ns/uts"):
        with entered("/proc/self/ns/uts"):
            pass
    with pytest.raises(FileNotFoundError):
        packet_socket(named_netns("p4t-no-such-namespace"), "lo")


@needs_root
def test_host_socket_binds_in_the_namespace_of_a_process() -> None:
    with Netns() as net:
        net.add_ns("a")
        net.add_ns("b")
        if_a, _ = net.add_link("a", "b")
        # `ip netns exec` enters the namespace after fork: the holder says when it is in.
        holder = subprocess.Popen([*net.exec_prefix("a"), "sh", "-c", "echo in; exec sleep 60"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "in\n"
            with pytest.raises(OSError):  # not an interface of this process's namespace
                packet_socket("/proc/thread-self/ns/net", if_a).close()
            with host_socket(holder.pid, if_a) as sock:
                assert sock.getsockname()[0] == if_a
            assert sock.fileno() == -1  # closed with the block
        finally:
            holder.kill()
            holder.wait()
            holder.stdout.close()
