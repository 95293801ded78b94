"""Stalls like a busy hypervisor's, on this machine: ``python -m bench.host_stall SHARE
SECONDS`` holds every core ``SHARE`` of the time, in stalls of 2-8 ms at random, above
the fabric's real-time processes.

On a virtual machine whose neighbours are busy, the hypervisor holds a vCPU off its core
for milliseconds (`emulation.host`); a switch or agent due then is late however idle the
guest is. That steal comes and goes with the neighbours. This makes it on demand, to see
what a fabric's fidelity does under it (docs/fabric.md, "Host steal"): one process per
core, pinned to it, at SCHED_FIFO STALL_PRIORITY (above the switches' SCHED_RR 10, so
they wait as for a held vCPU), spinning for a stall and sleeping between stalls. The
kernel counts the time as busy, not as steal: a verdict's "host steal" stays low.
The kernel's real-time throttling (95 % by default) bounds SHARE; root only.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
import traceback
from typing import NoReturn

STALL_PRIORITY = 50
STALL_S = (0.002, 0.008)     # measured stalls of a held vCPU: 2-8 ms (docs/fabric.md)
ENDING = {signal.SIGTERM, signal.SIGINT}


def stall_core(cpu: int, share: float, seconds: float) -> None:
    """On core ``cpu``, spin stalls of STALL_S for ``seconds``, ``share`` of the time."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(STALL_PRIORITY))
    rng = random.Random(cpu)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        stall = rng.uniform(*STALL_S)
        until = time.monotonic() + stall
        while time.monotonic() < until:
            pass
        # The gap averages stall x (1 - share) / share: the core is held ``share`` of the time.
        time.sleep(stall * (1 - share) / share * rng.uniform(0.5, 1.5))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.host_stall", description=__doc__.splitlines()[0])
    parser.add_argument("share", type=float, help="share of each core to hold, above 0 and at most 0.9")
    parser.add_argument("seconds", type=float, help="how long")
    args = parser.parse_args(argv)
    if not 0 < args.share <= 0.9:
        parser.error(f"share: above 0 and at most 0.9 (the kernel throttles real-time work at 0.95), got {args.share}")
    # Ended early (Ctrl-C, or SIGTERM from whoever started it), it ends its spinning
    # children too: left behind, they would hold the cores until their time is up.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    running: list[int] = []
    codes: list[int] = []
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            # No signal between a fork and its child's pid in ``running``: the child
            # would be left behind.
            signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)
            pid = os.fork()
            if pid == 0:
                _child(cpu, args.share, args.seconds)
            running.append(pid)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)
        while running:
            codes.append(os.waitstatus_to_exitcode(os.waitpid(running[0], 0)[1]))
            running.pop(0)
    except KeyboardInterrupt:
        for pid in running:
            os.kill(pid, signal.SIGTERM)
        for pid in running:
            os.waitpid(pid, 0)
        return 130
    return max(codes, default=0)


def _child(cpu: int, share: float, seconds: float) -> NoReturn:
    """A forked child's whole life: stall ``cpu``, then exit -- also on an error or an
    interrupt, which must not carry it back into the parent's code."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)
        stall_core(cpu, share, seconds)
        code = 0
    except PermissionError as e:
        print(f"host_stall: SCHED_FIFO refused ({e.strerror}): run as root", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
