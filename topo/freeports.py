"""Free ranges of local TCP ports: where a fabric's switches can serve gRPC.

A fabric's switches listen on ``grpc_port_base + i`` on 127.0.0.1. A test, benchmark
or experiment that brings up a fabric of its own beside another one (a `make run`, a
parallel test process) needs a base whose whole range is free, so it asks here
instead of using the spec's fixed base.
"""

from __future__ import annotations

import random
import socket

# Below Linux's default ephemeral range (32768-60999) in part, and above the
# well-known and most registered service ports.
PORT_LOW, PORT_HIGH = 20000, 40000
ATTEMPTS = 100
# Seeded from the OS: parallel processes pick different ranges, and successive calls
# in one process (one fabric after another) do too.
_rng = random.Random()


def free_port_base(count: int, host: str = "127.0.0.1") -> int:
    """A base port with ``count`` consecutive TCP ports free on ``host`` (each one
    bound once and released), chosen at random so that concurrent callers rarely
    meet; RuntimeError if none is found in ATTEMPTS tries."""
    if count < 1:
        raise ValueError(f"free_port_base: count must be at least 1, not {count}")
    for _ in range(ATTEMPTS):
        base = _rng.randrange(PORT_LOW, PORT_HIGH)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no range of {count} free TCP ports on {host} in {ATTEMPTS} tries "
                       f"between {PORT_LOW} and {PORT_HIGH}")
