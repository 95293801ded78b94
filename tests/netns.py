"""Frames received in tests, with the kernel's arrival times.

The namespaces and their sockets are `topo.namespaces.Netns` (shared with the
benchmarks); its ``socket`` turns the kernel's receive timestamps on.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Callable

from topo.namespaces import SO_TIMESTAMPNS


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
