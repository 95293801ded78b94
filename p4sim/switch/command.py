"""``p4sim switch``: a v1model switch process, a drop-in for ``simple_switch_grpc``.

Takes the flags the P4 tutorials' Mininet nodes pass to simple_switch_grpc (target
options may follow a ``--`` separator, as simple_switch_grpc requires), plus p4sim's
own queue settings::

    p4sim switch -i 1@s1-eth1 -i 2@s1-eth2 --device-id 1 --pcap pcaps \\
        --log-file s1.log --log-level info build/prog.json \\
        -- --grpc-server-addr 127.0.0.1:50051 --cpu-port 255 \\
        --port-rate 1=20 --port-rate 2=20 --queue-depth 64

``--port-rate`` is in Mbit/s of Ethernet frame bytes (what a capture shows), the
queue depth in packets per queue, ``--queue-rate`` in packets/s for every port (BMv2's
``set_queue_rate``). P4Runtime is served on ``--grpc-server-addr`` (default
127.0.0.1:9559: loopback, where simple_switch_grpc listens on 0.0.0.0; ``unix:PATH``
works too), together with the ``p4sim.QueueControl`` service that changes port rates
and queue depths at run time (p4sim/runtime/queues.py). ``--pcap DIR`` writes
``<iface>_in.pcap`` and ``<iface>_out.pcap`` per port (``cpu_*.pcap`` for the CPU
port). The process runs until SIGINT or SIGTERM and logs its counters when it stops.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

from emulation.clock import ENV as CLOCK_ENV
from emulation.clock import ClockError, EmulationClock
from p4sim.runtime.server import DEFAULT_ADDRESS, RuntimeServer
from p4sim.switch.device import Device
from p4sim.switch.errors import ProgramError
from p4sim.switch.native.device import NativeDevice
from p4sim.switch.native.engine import NativeSwitch, make_engine
from p4sim.switch.native.libswitch import NativeBuildError
from p4sim.switch.pfc import DEFAULT_HEADROOM, DEFAULT_XOFF, DEFAULT_XON, PfcConfig
from p4sim.switch.ports import PortError
from p4sim.switch.traffic_manager import DEFAULT_QUEUE_DEPTH
from p4sim.switch.v1model import V1Switch

log = logging.getLogger("p4sim.switch")

# The forwarding loop and the P4Runtime server's threads share the GIL; Python's default
# 5 ms switch interval would let a control-plane call hold the loop off for 5 ms (more
# than a packet time on a 10 Mbit/s link). 0.5 ms bounds that at a small cost.
GIL_SWITCH_INTERVAL_S = 0.0005

# BMv2's log level names, mapped onto Python's ("trace" is BMv2's most verbose).
LOG_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
              "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}


class UsageError(Exception):
    """A flag value that cannot be used; the message names the flag and the value."""


def parse_interface(text: str) -> tuple[int, str]:
    """``PORT@IFACE`` -> (port, iface), as simple_switch's ``-i``."""
    number, sep, iface = text.partition("@")
    if not sep or not iface or not number.isdigit():
        raise UsageError(f"-i {text!r}: expected PORT@IFACE, e.g. 1@s1-eth1")
    return int(number), iface


def parse_port_rate(text: str) -> tuple[int, float]:
    """``PORT=MBPS`` -> (port, bytes per second)."""
    number, sep, mbps = text.partition("=")
    try:
        rate = float(mbps)
    except ValueError:
        rate = -1.0
    if not sep or not number.isdigit() or not rate > 0:
        raise UsageError(f"--port-rate {text!r}: expected PORT=MBPS with MBPS > 0, e.g. 1=20")
    return int(number), rate * 1e6 / 8


def parse_pfc(args: argparse.Namespace) -> PfcConfig | None:
    """The --pfc flags as a PfcConfig (None without --pfc)."""
    if args.pfc is None:
        return None
    try:
        priorities = frozenset(int(p) for p in args.pfc.split(","))
    except ValueError:
        raise UsageError(f"--pfc {args.pfc!r}: expected priorities 0..7, e.g. 3 or 3,4") from None
    try:
        return PfcConfig(priorities, args.pfc_xoff, args.pfc_xon, args.pfc_headroom,
                         args.pfc_watchdog_ms * 1e3)
    except ValueError as e:
        raise UsageError(f"--pfc: {e}") from None


def parse_loop_cpu(text: str) -> int | None:
    """``--loop-cpu``: a core number this process may run on, ``last`` (the highest of
    them), or ``none`` (no pinning) -> the core, or None."""
    allowed = os.sched_getaffinity(0)
    if text == "none":
        return None
    if text == "last":
        return max(allowed)
    if not text.isdigit() or int(text) not in allowed:
        raise UsageError(f"--loop-cpu {text!r}: expected none, last or one of this process's "
                         f"cores {sorted(allowed)}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="p4sim switch",
        description="A v1model software switch with real egress queues and a P4Runtime "
                    "server, flag-compatible with simple_switch_grpc.")
    p.add_argument("json", nargs="?", help="BMv2 JSON pipeline to load at start")
    p.add_argument("--no-p4", action="store_true",
                   help="start without a pipeline and wait for SetForwardingPipelineConfig")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                   help="attach switch port PORT to interface IFACE (repeatable)")
    p.add_argument("--device-id", type=int, default=0, help="device id (P4Runtime)")
    p.add_argument("--grpc-server-addr", default=DEFAULT_ADDRESS, metavar="HOST:PORT",
                   help=f"serve P4Runtime (and p4sim.QueueControl) here (default {DEFAULT_ADDRESS})")
    p.add_argument("--cpu-port", type=int, help="port number whose packets are PacketIn/PacketOut")
    p.add_argument("--pcap", nargs="?", const=".", metavar="DIR",
                   help="write <iface>_in.pcap / <iface>_out.pcap per port into DIR (default .)")
    p.add_argument("--log-console", action="store_true", help="log to stdout")
    p.add_argument("--log-file", metavar="PATH", help="log to this file")
    p.add_argument("--log-level", "-L", choices=sorted(LOG_LEVELS), default="info",
                   help="level for --log-console/--log-file (default info)")
    p.add_argument("--priority-queues", type=int, default=1, metavar="N",
                   help="strict-priority queues per port (standard_metadata.priority selects)")
    p.add_argument("--port-rate", action="append", default=[], metavar="PORT=MBPS",
                   help="line rate of a port in Mbit/s (repeatable; default unlimited)")
    p.add_argument("--queue-depth", type=int, default=DEFAULT_QUEUE_DEPTH, metavar="PKTS",
                   help=f"packets per egress queue before tail drop (default {DEFAULT_QUEUE_DEPTH})")
    p.add_argument("--queue-rate", type=float, metavar="PPS",
                   help="packets/s limit of every egress queue (default unlimited)")
    p.add_argument("--pfc", metavar="PRIO[,PRIO...]",
                   help="make these priorities lossless: priority flow control (IEEE 802.1Qbb) "
                        "with per-ingress-port accounting (needs --priority-queues above them)")
    p.add_argument("--pfc-xoff", type=int, default=DEFAULT_XOFF, metavar="BYTES",
                   help=f"send PAUSE above this many bytes queued from one ingress port and "
                        f"priority (default {DEFAULT_XOFF})")
    p.add_argument("--pfc-xon", type=int, default=DEFAULT_XON, metavar="BYTES",
                   help=f"send the resume at or below this (default {DEFAULT_XON})")
    p.add_argument("--pfc-headroom", type=int, default=DEFAULT_HEADROOM, metavar="BYTES",
                   help=f"admitted above XOFF before dropping: what the link's round trip "
                        f"holds (default {DEFAULT_HEADROOM})")
    p.add_argument("--pfc-watchdog-ms", type=float, default=0.0, metavar="MS",
                   help="a lossless queue paused this long (emulated ms) with packets waiting "
                        "loses its lossless status (default 0: no watchdog)")
    p.add_argument("--clock", metavar="ORIGIN_NS:DILATION",
                   help=f"the fabric's emulation clock (default ${CLOCK_ENV}, else a fresh "
                        "undilated clock): CLOCK_MONOTONIC origin and wall seconds per "
                        "emulated second")
    p.add_argument("--engine", choices=("auto", "native", "python"), default="auto",
                   help="the pipeline's engine: native (generated in C from the JSON and "
                        "compiled; refuses a program with a construct it does not run, naming "
                        "it), python (the reference engine), auto (default: native when it runs "
                        "the program, else python, said once in the log)")
    p.add_argument("--loop-cpu", default="none", metavar="CPU|last|none",
                   help="run the packet loop's thread on this core (last: the highest core "
                        "the process may use; default none: wherever the kernel puts it). "
                        "A fabric's switches share one core this way (docs/fabric.md)")
    p.add_argument("--thrift-port", type=int,
                   help="accepted for simple_switch_grpc compatibility; p4sim has no Thrift server")
    return p


def setup_logging(args: argparse.Namespace) -> None:
    """Warnings and errors always reach stderr; --log-console/--log-file add a full log."""
    fmt = logging.Formatter("%(asctime)s.%(msecs)03d [%(levelname)s] %(name)s: %(message)s",
                            "%H:%M:%S")
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    handlers: list[logging.Handler] = []
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stdout))
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    for h in handlers:
        h.setLevel(LOG_LEVELS[args.log_level])
    if not args.log_console:
        err = logging.StreamHandler(sys.stderr)
        err.setLevel(logging.WARNING)
        handlers.append(err)
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)


def load_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read pipeline '{path}': {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from e
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a BMv2 JSON pipeline is an object, found {type(data).__name__}")
    return data


def open_device(args: argparse.Namespace, ports: dict[int, str], rates: dict[int, float],
                pfc: PfcConfig | None, clock: EmulationClock,
                pipeline: dict[str, Any] | None,
                loop_cpu: int | None = None) -> tuple[Device, V1Switch | None]:
    """The device ``--engine`` asks for and, given a JSON, its engine (not installed yet).

    The engine is decided before the device exists, because it decides the device: a
    native pipeline runs in the C loop (`NativeDevice`), so that no frame costs Python;
    a Python pipeline needs the Python loop (`Device`). ``auto`` with a JSON builds
    the engine first (the compiled pipeline is cached under build/native, so a switch
    pays gcc once per program) and falls back to Python, saying which construct made
    it, when the C engine does not run the program. ``auto`` with ``--no-p4`` has no
    program to judge: it takes the C loop, which then refuses a pushed program the C
    engine cannot run (naming the construct; ``--engine python`` runs it). When the C
    loop itself cannot be built (no compiler), ``auto`` says why and runs Python.
    Raises `ProgramError` (the program), `PortError`/`ValueError`/`OSError` (the ports).
    """
    kwargs: dict[str, Any] = dict(device_id=args.device_id, cpu_port=args.cpu_port,
                                  priority_queues=args.priority_queues, queue_depth=args.queue_depth,
                                  queue_rate_pps=args.queue_rate, port_rates=rates, pcap_dir=args.pcap,
                                  clock=clock, pfc=pfc, loop_cpu=loop_cpu)
    engine = None
    if pipeline is not None:
        engine = make_engine(pipeline, args.engine, cpu_port=args.cpu_port,
                             device_id=args.device_id, clock=clock.now_us)
    if args.engine == "python" or (engine is not None and not isinstance(engine, NativeSwitch)):
        return Device(ports, engine=args.engine, **kwargs), engine
    try:
        return NativeDevice(ports, engine=args.engine, **kwargs), engine
    except NativeBuildError as e:
        if args.engine == "native":
            raise ProgramError(str(e)) from e
        log.warning("the native packet loop cannot be built (%s): using the Python loop", e)
        return Device(ports, engine=args.engine, **kwargs), engine


@dataclass
class SwitchArgs:
    """One switch's command line, checked: what `start_switch` opens."""

    args: argparse.Namespace
    ports: dict[int, str]
    rates: dict[int, float]
    pipeline: dict[str, Any] | None
    pfc: PfcConfig | None
    loop_cpu: int | None
    clock: EmulationClock


class StartError(Exception):
    """A switch that could not start; the message (already logged) says why."""


def parse_switch(argv: list[str], prog: str = "p4sim switch") -> SwitchArgs:
    """``p4sim switch``'s arguments, checked; `UsageError` or `ClockError` naming the
    flag (argparse itself exits on an unknown flag)."""
    # simple_switch_grpc wants target options after "--"; here all options are one set.
    argv = [a for a in argv if a != "--"]
    parser = build_parser()
    parser.prog = prog
    args = parser.parse_args(argv)
    ports = dict(parse_interface(t) for t in args.interface)
    if len(ports) != len(args.interface):
        raise UsageError("-i: the same port number is given twice")
    rates = dict(parse_port_rate(t) for t in args.port_rate)
    if args.json is None and not args.no_p4:
        raise UsageError("give a BMv2 JSON file or --no-p4")
    if args.json is not None and args.no_p4:
        raise UsageError("--no-p4 and a JSON file exclude each other")
    pipeline = load_json(args.json) if args.json else None
    clock = EmulationClock.decode(args.clock, "--clock") if args.clock else EmulationClock.from_env()
    return SwitchArgs(args, ports, rates, pipeline, parse_pfc(args), parse_loop_cpu(args.loop_cpu), clock)


def start_switch(sw: SwitchArgs) -> tuple[Device, RuntimeServer]:
    """The switch's device with its pipeline installed and its P4Runtime server
    listening; `StartError` (logged) when either cannot be, nothing left open."""
    args = sw.args
    if args.thrift_port is not None:
        log.info("--thrift-port %d ignored: p4sim is programmed over P4Runtime only", args.thrift_port)
    try:
        device, engine = open_device(args, sw.ports, sw.rates, sw.pfc, sw.clock, sw.pipeline, sw.loop_cpu)
    except ProgramError as e:
        log.error("cannot load pipeline %s: %s", args.json, e)
        raise StartError(str(e)) from e
    except (PortError, ValueError, OSError) as e:
        log.error("%s", e)
        raise StartError(str(e)) from e
    server = RuntimeServer(device, args.grpc_server_addr, device_id=args.device_id, queue_control=device)
    try:
        if engine is not None:
            device.install(engine)
            log.info("pipeline loaded from %s (%s engine)", args.json,
                     "native" if isinstance(engine, NativeSwitch) else "python")
        server.start()
    except RuntimeError as e:
        log.error("%s", e)
        server.stop()
        device.close()
        raise StartError(str(e)) from e
    except BaseException:
        server.stop()
        device.close()
        raise
    log.info("P4Runtime server listening on %s (port %d)", args.grpc_server_addr, server.port)
    return device, server


def main(argv: list[str]) -> int:
    try:
        sw = parse_switch(argv)
    except (UsageError, ClockError) as e:
        print(f"p4sim switch: {e}", file=sys.stderr)
        return 2
    setup_logging(sw.args)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        device, server = start_switch(sw)
    except StartError:
        return 1
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: device.stop())
        device.run()
    finally:
        server.stop()
        device.close()
    return 0
