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
runs until SIGINT or SIGTERM, which stop every switch. A switch's failure alone (its
process killed) needs a process of its own: `topo.nodes` starts the fabric's switches
this way only when the spec asks for it (``switch_process: shared``).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys

from emulation.clock import ClockError
from p4sim.runtime.server import RuntimeServer
from p4sim.switch.command import (GIL_SWITCH_INTERVAL_S, LOG_LEVELS, StartError, SwitchArgs, UsageError,
                                  parse_switch, setup_logging, start_switch)
from p4sim.switch.device import Device
from p4sim.switch.native.device import NativeDevice, run_devices

# The flags a switch's own command line may not carry here: the process logs once.
PROCESS_FLAGS = ("--log-file", "--log-console", "--log-level", "-L")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="p4sim switches",
        description="Several native p4sim switches in one process sharing one packet loop "
                    "thread; each keeps its own ports, device id and P4Runtime server.")
    p.add_argument("--switch", action="append", default=[], metavar="'SWITCH ARGS'", required=True,
                   help="one switch's `p4sim switch` arguments, shell-quoted (repeatable)")
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


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        switches = parse_switches(args.switch)
    except UsageError as e:
        print(f"p4sim switches: {e}", file=sys.stderr)
        return 2
    setup_logging(args)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
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
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: [d.stop() for d in devices])
        try:
            run_devices(devices)
        except ValueError as e:
            print(f"p4sim switches: {e}", file=sys.stderr)
            return 2
    finally:
        for device, server in started:
            server.stop()
            device.close()
    return 0
