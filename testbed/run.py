"""``python -m testbed.run``: launch the fabric and leave the user at a prompt (`make run`).

Compiles the P4 program (or reuses the last build), starts the fabric and configures
its hosts, starts GOR (the controller: telemetry, alarms, rerouting), then runs GOR's
prompt (`controller.repl`, Mininet's CLI plus GOR's commands) -- which reads its
commands from a pipe or file as well (``echo links | make run``). Leaving the prompt,
Ctrl-C, SIGTERM or an error tear everything down (GOR, agents, fabric). A bad spec
gives one error and starts nothing. A spec with a ``cluster`` section (or ``--servers``)
runs the fabric over those machines on Mininet's cluster mode (`topo.cluster`).

The fabric is brought up with no programming step: GOR's P4Runtime sessions push the
pipeline and the routes to each switch as it connects (the same path that re-pushes a
restarted switch), so every switch is programmed once, by its controller.

Why here and not in `topo/` or `experiments/`: this is the one module that knows both
the fabric and the controller, so it lives above both packages (topo imports nothing of
the controller); `experiments/` is `make demo`'s unattended runs and their numbers,
this is an interactive session.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
import time
from types import FrameType

from mininet.log import setLogLevel

from controller.gor import Gor
from controller.repl import GorCLI
from controller.switches import SwitchFleetError
from p4sim.compiler import CompileError
from testbed.clients import p4runtime_shell
from topo.cluster import fabric_for
from topo.net import FabricError
from topo.nodes import BACKENDS
from topo.pipeline import PROGRAM
from topo.spec import ClusterSpec, FabricSpec, SpecError, load_spec, replace

DEFAULT_FABRIC = "topo/fabrics/default.yaml"


# Set once the main thread has run `_exit_on_signal` (the wake-up thread's stop condition).
_SIGNAL_HANDLED = threading.Event()
# How long the wake-up thread keeps interrupting the main thread, and how often.
_WAKE_FOR_S, _WAKE_EVERY_S = 5.0, 0.05


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    _SIGNAL_HANDLED.set()
    raise SystemExit(128 + signum)


def _wake_main_thread_on_signals() -> None:
    """Make SIGTERM and SIGHUP end an idle prompt at once.

    Python runs signal handlers in the main thread, but the kernel hands a signal to
    any thread: when GOR's, finsy's or gRPC's thread gets it, the main thread sleeps on
    in readline's select() until a key is pressed, and a `kill` (a test's cleanup, a
    closed terminal) tore nothing down -- until SIGKILL left the fabric behind. The
    handler's wakeup byte (`signal.set_wakeup_fd`) goes to a thread that interrupts
    the main thread's wait with SIGUSR1 (no-op handler), which then runs the handler.
    It interrupts again every _WAKE_EVERY_S until the handler has run: readline checks
    for signals only when its select() fails with EINTR, so a SIGUSR1 that lands just
    before the select() starts is lost (seen once in ~20 suite runs: the prompt slept
    on until the test's second SIGTERM, 20 s later).
    """
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: None)
    signal.set_wakeup_fd(write_end)
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def forward() -> None:
        while True:
            if any(b != signal.SIGUSR1 for b in os.read(read_end, 64)):
                until = time.monotonic() + _WAKE_FOR_S
                signal.pthread_kill(main_thread, signal.SIGUSR1)
                while not _SIGNAL_HANDLED.wait(_WAKE_EVERY_S) and time.monotonic() < until:
                    signal.pthread_kill(main_thread, signal.SIGUSR1)

    threading.Thread(target=forward, name="signal-wake", daemon=True).start()


def with_servers(spec: FabricSpec, servers: str) -> FabricSpec:
    """``spec`` run on ``servers`` (``--servers``): its cluster section's other keys kept."""
    names = tuple(servers.replace(",", " ").split())
    cluster = spec.cluster or ClusterSpec(servers=names)
    return replace(spec, cluster=dataclasses.replace(cluster, servers=names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.run", description=__doc__.splitlines()[0])
    parser.add_argument("--fabric", default=DEFAULT_FABRIC, help=f"fabric spec (default {DEFAULT_FABRIC})")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="p4sim",
                        help="switch implementation (default p4sim)")
    parser.add_argument("--pcap", action="store_true", help="capture every switch port (build/run/pcap)")
    parser.add_argument("--servers", default="",
                        help="machines to run the fabric on, space- or comma-separated (the spec's "
                             "cluster.servers; localhost = this one); docs/fabric.md")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.fabric)
        if args.pcap:
            spec = replace(spec, pcap=True)
        if args.servers.strip():
            spec = with_servers(spec, args.servers)
        fabric = fabric_for(spec, backend=args.backend)
    except (SpecError, FabricError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    _wake_main_thread_on_signals()
    setLogLevel("info")
    started = time.monotonic()
    gor: Gor | None = None
    try:
        fabric.start()
        assert fabric.pipeline is not None
        gor = Gor(fabric.plan, fabric.pipeline, fabric.run_dir, fabric=fabric)
        gor.start()
        first, last = fabric.plan.servers[0], fabric.plan.servers[-1]
        print(f"*** Fabric '{spec.name}' ready in {time.monotonic() - started:.1f} s: "
              f"{len(fabric.plan.servers)} servers x {spec.rails} rails, {spec.leaves} leaves, "
              f"{spec.spine_switches} spines"
              + (f" in {spec.pods} pods, {spec.super_spine_switches} super-spines" if spec.tiers == 3 else "")
              + f" ({args.backend}, {PROGRAM.name}, ECMP {spec.ecmp_hash}); "
              f"GOR polling every {gor.config.interval_s:g} s; emulated time at dilation "
              f"{fabric.clock.dilation:g} (wall s per emulated s, docs/fabric.md).\n"
              f"*** Try: help, links, alarms, flows, job allreduce 1M --wait, sleep 2, p4sh {fabric.plan.leaves[0].name}, watch, nics, pingall, "
              f"{first.name} ping -c1 -I {first.nics[0].ip} {last.nics[-1].ip}", flush=True)
        GorCLI(fabric, gor, shell_python=p4runtime_shell)
    except (FabricError, CompileError, SwitchFleetError, RuntimeError) as e:
        # Bring-up failures (a switch that did not start, a rejected write, a compile
        # error) end with their message; the fabric is already torn down by then.
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C during start-up (the prompt handles its own)
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if gor is not None:
            gor.stop()
        fabric.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
