"""``p4sim switches``: several native switches in one process, one C loop for all.

Each ``--switch`` is one switch's ``p4sim switch`` command line (shell-quoted), and each
switch stays what it is alone -- its device id, ports, P4Runtime and QueueControl server
on its own address, tables, traffic manager, PFC, captures::

    p4sim switches --log-file sw.log \\
        --switch "-i 1@s1-eth1 -i 2@s1-eth2 --device-id 1 --grpc-server-addr 127.0.0.1:50051 --no-p4" \\
        --switch "-i 1@s2-eth1 --device-id 2 --grpc-server-addr 127.0.0.1:50052 --no-p4"

What they share is the packet loop: one thread (`native.device.run_devices`, loop.c's
`p4n_devices_run`) sleeps to the emulation clock's grid once and waits on every
switch's rings with one ppoll, then does each switch's work under that switch's lock.
A fabric's switches alone each wake once per quantum; together they wake once
(docs/fabric.md, "Native switches"). BMv2 keeps a switch apart from its runtime server
in the same way; here several devices share one loop thread as well.

Every switch must run the native loop (the Python loop is a thread per switch: nothing
to share) and all share one emulation clock and loop CPU. Logging is the process's
(``--log-file``/``--log-console``/``--log-level`` here, not per switch). The process
runs until SIGINT or SIGTERM, which stop every switch.

``--members SOCKET`` takes switches while it runs: each connection on that Unix socket
is one ``p4sim switch-member`` process (p4sim/switch/member.py) bringing one switch's
arguments; the switch runs from then until that connection closes -- its member
stopped or killed -- and then it alone stops (its server, its rings), the others going
on in the same loop. So a fabric's switch node still has a process of its own to kill
and restart (``switch_process: shared``, `topo.nodes.P4SimSharedSwitch`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import selectors
import shlex
import signal
import socket
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from emulation.clock import ClockError
from p4sim.runtime.server import RuntimeServer
from p4sim.switch.command import (GIL_SWITCH_INTERVAL_S, LOG_LEVELS, StartError, SwitchArgs, UsageError,
                                  parse_switch, setup_logging, start_switch)
from p4sim.switch.device import Device
from p4sim.switch.member import encode
from p4sim.switch.native.device import LoopGroup, NativeDevice, run_devices

log = logging.getLogger(__name__)

# The flags a switch's own command line may not carry here: the process logs once.
PROCESS_FLAGS = ("--log-file", "--log-console", "--log-level", "-L")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="p4sim switches",
        description="Several native p4sim switches in one process sharing one packet loop "
                    "thread; each keeps its own ports, device id and P4Runtime server.")
    p.add_argument("--switch", action="append", default=[], metavar="'SWITCH ARGS'",
                   help="one switch's `p4sim switch` arguments, shell-quoted (repeatable)")
    p.add_argument("--members", metavar="SOCKET",
                   help="also run the switches `p4sim switch-member` processes bring over this Unix "
                        "socket, each while its member lives")
    p.add_argument("--log-console", action="store_true", help="log to stdout")
    p.add_argument("--log-file", metavar="PATH", help="log to this file")
    p.add_argument("--log-level", "-L", choices=sorted(LOG_LEVELS), default="info",
                   help="level for --log-console/--log-file (default info)")
    return p


def parse_switches(texts: list[str]) -> list[SwitchArgs]:
    """Each ``--switch`` text parsed as `p4sim switch` would; `UsageError` naming the
    switch (by its place) and the flag."""
    out = []
    for k, text in enumerate(texts, 1):
        argv = shlex.split(text)
        own = [a for a in argv if a.split("=", 1)[0] in PROCESS_FLAGS]
        if own:
            raise UsageError(f"--switch #{k}: {own[0]} is the process's flag here, give it to "
                             f"p4sim switches once")
        try:
            out.append(parse_switch(argv, prog=f"p4sim switches --switch #{k}"))
        except (UsageError, ClockError) as e:
            raise UsageError(f"--switch #{k}: {e}") from e
    return out


# A member sends its switch's arguments right after connecting: seconds to wait for them.
MEMBER_HELLO_TIMEOUT_S = 10.0


class Members:
    """The switches ``p4sim switch-member`` processes bring (``--members``): one thread
    accepts on the socket and watches every member's connection; a switch starts when
    its member's arguments come and stops, alone, when that connection closes."""

    def __init__(self, path: str, group: LoopGroup) -> None:
        self._group = group
        self._path = Path(path)
        self._path.unlink(missing_ok=True)   # a previous process's, which is gone
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self._path))
        self._listener.listen(64)
        self._wake_r, self._wake_w = os.pipe()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._switches: dict[socket.socket, tuple[NativeDevice, RuntimeServer]] = {}
        # Ended switches' devices close here, side by side (`_end`).
        self._closer = ThreadPoolExecutor(max_workers=16, thread_name_prefix="switch-close")
        self._thread = threading.Thread(target=self._serve, name="switch-members", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, then stop every member's switch (the members see the socket
        close and end)."""
        os.write(self._wake_w, b"x")
        self._thread.join()
        for conn in list(self._switches):
            self._end(conn)
        self._closer.shutdown(wait=True)
        self._selector.close()
        self._listener.close()
        self._path.unlink(missing_ok=True)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _serve(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self._listener:
                    self._accept()
                elif key.fileobj == self._wake_r:
                    return
                else:
                    self._readable(key.fileobj)

    def _accept(self) -> None:
        conn, _ = self._listener.accept()
        try:
            conn.settimeout(MEMBER_HELLO_TIMEOUT_S)
            with conn.makefile("rb") as hello:
                answer, started = self._start(json.loads(hello.readline())["switch"])
            if started is not None:
                self._switches[conn] = started
            conn.sendall(encode(answer))
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("a member left before its switch ran (%s)", e)
            started = None
            if conn in self._switches:
                self._end(conn)
        if started is None:
            conn.close()
            return
        conn.setblocking(False)
        self._selector.register(conn, selectors.EVENT_READ)

    def _start(self, argv: list[str]) -> tuple[dict, tuple[NativeDevice, RuntimeServer] | None]:
        """The answer to a member bringing ``argv`` -- the error, or the device id -- and
        its switch, started and running in the loop."""
        try:
            sw = parse_switch([str(a) for a in argv], prog="p4sim switch-member")
        except (UsageError, ClockError) as e:
            return {"error": str(e)}, None
        except SystemExit:   # argparse said why on stderr, i.e. in this process's log
            return {"error": "bad switch arguments (see p4sim switches' log)"}, None
        address, device_id = sw.args.grpc_server_addr, sw.args.device_id
        for conn, (device, server) in list(self._switches.items()):
            if device.device_id == device_id or server.address == address:
                if not _closed(conn):
                    return {"error": f"device {device.device_id} on {server.address} already runs here"}, None
                self._end(conn)   # its member is gone: the restart came first
        try:
            device, server = start_switch(sw)
        except StartError as e:
            return {"error": str(e)}, None
        try:
            if not isinstance(device, NativeDevice):
                raise ValueError("this switch runs the Python loop (--engine python, or no C compiler): "
                                 "start it as a p4sim switch of its own")
            self._group.add(device)
        except ValueError as e:
            server.stop()
            device.close()
            return {"error": str(e)}, None
        return {"device_id": device_id, "pid": os.getpid()}, (device, server)

    def _readable(self, conn: socket.socket) -> None:
        """A member's connection closed (its process stopped or killed) -- or spoke out
        of turn, which ends it as well."""
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if data:
            log.warning("device %d's member sent %d unexpected bytes: stopping the switch",
                        self._switches[conn][0].device_id, len(data))
        self._end(conn)

    def _end(self, conn: socket.socket) -> None:
        """Stop the switch of ``conn``'s member -- server first (its streams end, its
        address is free for a restart), then its part of the loop -- and close the
        connection, which tells a member that waits (a SIGTERM) that its switch has
        stopped. Its ports close on the closer's threads meanwhile: each device's close
        waits out the kernel's RCU grace periods (~25 ms), and a fabric's stop, ending
        every member at once, waited them out one device after another (10 switches:
        0.35-0.45 s)."""
        device, server = self._switches.pop(conn)
        log.info("device %d's member is gone: stopping the switch", device.device_id)
        server.stop()
        self._group.remove(device)
        self._closer.submit(device.close).add_done_callback(_log_close_error)
        try:
            self._selector.unregister(conn)
        except KeyError:
            pass    # not registered yet: ended by a restart before it was watched
        conn.close()


def _log_close_error(done: Future) -> None:
    """A device's close failed on the closer's thread: its log says so."""
    if done.exception() is not None:
        log.error("closing a stopped switch's device failed: %s", done.exception())


def _closed(conn: socket.socket) -> bool:
    """True once the peer of ``conn`` has closed it."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if not args.switch and args.members is None:
        print("p4sim switches: give --switch, --members or both", file=sys.stderr)
        return 2
    try:
        switches = parse_switches(args.switch)
    except UsageError as e:
        print(f"p4sim switches: {e}", file=sys.stderr)
        return 2
    setup_logging(args)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    if args.members is not None:
        # Every thread started from here on blocks them too: sigwait below takes them.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    started: list[tuple[Device, RuntimeServer]] = []
    try:
        for k, sw in enumerate(switches, 1):
            try:
                device, server = start_switch(sw)
            except StartError:
                return 1
            started.append((device, server))
            if not isinstance(device, NativeDevice):
                print(f"p4sim switches: --switch #{k} runs the Python loop (--engine python, or a "
                      f"program only Python runs): start it as a p4sim switch of its own",
                      file=sys.stderr)
                return 2
        devices = [device for device, _ in started if isinstance(device, NativeDevice)]
        try:
            if args.members is None:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, lambda *_: [d.stop() for d in devices])
                run_devices(devices)
            else:
                serve_members(args.members, devices)
        except ValueError as e:
            print(f"p4sim switches: {e}", file=sys.stderr)
            return 2
    finally:
        for device, server in started:
            server.stop()
            device.close()
    return 0


def serve_members(path: str, devices: list[NativeDevice]) -> None:
    """Run ``devices`` and the switches members bring over ``path`` in one loop until
    SIGINT or SIGTERM (blocked in every thread: this one takes them)."""
    group = LoopGroup(devices)
    try:
        members = Members(path, group)
        log.info("taking members on %s", path)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
        members.close()
    finally:
        group.close()
