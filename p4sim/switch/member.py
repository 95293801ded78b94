"""``p4sim switch-member``: one switch of a ``p4sim switches`` process, as a process of its own.

A fabric's switches share one process and one packet loop (p4sim/switch/shared.py),
but a failure experiment kills ONE switch's process and must see exactly that switch
die. So each switch node runs this small process, which hands its switch's ``p4sim
switch`` arguments to the shared process over its Unix socket (``--members``) and
then only holds the connection::

    p4sim switch-member --shared build/run/switches.sock -- -i 1@s1-eth1 --device-id 1 \\
        --grpc-server-addr 127.0.0.1:50051 --no-p4

The shared process runs the switch while the connection is open. When this process
dies -- SIGKILL included, the kernel closes its socket -- the shared process stops that
switch alone: its P4Runtime server (streams broken), its packet loop (ports silent).
Started again, it gets a new switch, with empty tables, as a restarted ``p4sim
switch`` does. SIGTERM/SIGINT stop it in order: it waits until the shared process
has stopped the switch, so that whoever stopped it may delete the interfaces. When
the shared process ends, this one ends too (status 1): its switch is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time

# The line printed once the shared process runs the switch (topo.nodes waits for it).
READY = "p4sim switch-member: running"
CONNECT_RETRY_S = 0.05
STOP_TIMEOUT_S = 10.0


def encode(message: dict) -> bytes:
    """One message on a member's connection: a JSON object on a line."""
    return json.dumps(message).encode() + b"\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="p4sim switch-member",
        description="Run one switch inside a `p4sim switches --members SOCKET` process for as long as "
                    "this process lives.")
    p.add_argument("--shared", required=True, metavar="SOCKET", help="the shared process's members socket")
    p.add_argument("--connect-timeout", type=float, default=30.0, metavar="S",
                   help="seconds to wait for the shared process's socket (default 30)")
    p.add_argument("switch", nargs=argparse.REMAINDER, help="-- then the switch's `p4sim switch` arguments")
    return p


def connect(path: str, timeout_s: float) -> socket.socket:
    """A connection to ``path``, retried while the shared process is still starting."""
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(CONNECT_RETRY_S)


def read_line(sock: socket.socket) -> bytes:
    """One line from ``sock`` (without its newline); b"" when it closed first."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            return b""
        data += chunk
    return data[:-1]


class _Stopped(Exception):
    """SIGTERM or SIGINT: raised from the handler, as a blocked recv resumes otherwise."""


# Whether a signal has asked us to stop: only the first raises. A second SIGTERM
# (Mininet's stop signals again after its batch shutdown did) must not cut short the
# wait for the switch to stop -- the caller deletes the interfaces once we end -- and
# it can land anywhere, even in the line that would have set SIG_IGN (seen in a suite).
_asked_to_stop = False


def _stop(*_: object) -> None:
    global _asked_to_stop
    if not _asked_to_stop:
        _asked_to_stop = True
        raise _Stopped


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    switch = args.switch[1:] if args.switch[:1] == ["--"] else args.switch
    try:
        sock = connect(args.shared, args.connect_timeout)
    except OSError as e:
        print(f"p4sim switch-member: cannot reach p4sim switches at {args.shared}: {e}", file=sys.stderr)
        return 1
    with sock:
        sock.sendall(encode({"switch": switch}))
        reply = read_line(sock)
        answer = json.loads(reply) if reply else {"error": "p4sim switches closed the connection"}
        if "error" in answer:
            print(f"p4sim switch-member: {answer['error']}", file=sys.stderr, flush=True)
            return 1
        print(f"{READY} as device {answer['device_id']} in p4sim switches (pid {answer['pid']})", flush=True)
        try:
            signal.signal(signal.SIGTERM, _stop)
            signal.signal(signal.SIGINT, _stop)
            # Until the shared process ends (its socket closes) or a signal stops us.
            while sock.recv(4096):
                pass
            print("p4sim switch-member: p4sim switches ended: the switch is gone", file=sys.stderr)
            return 1
        except _Stopped:
            pass
        # From here on signals are ignored, not handled: Python's exit puts a handled
        # signal back to its default, so a second SIGTERM landing then -- the switch
        # stops in a few ms -- would kill us with our exit status unsaid.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Stopped: say so by closing our half, and wait until the switch has stopped.
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(STOP_TIMEOUT_S)
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass
    print(f"p4sim switch-member: stopped (pid {os.getpid()})", flush=True)
    return 0
