"""Choosing the dilation at fabric start (spec ``dilation: auto``).

It lives with the fabric because it is a property of a fabric spec on a machine; the
clock it parametrises is `emulation.clock`.

The emulation is faithful while its processes get the CPU when their packets are due;
the fabric should keep half the machine's cores free (CPU_BUDGET) for the moments when
several switches and agents are due at once. Dilation stretches emulated time until
the fabric's demand fits: the default fabric's shape at 10 Mbit/s, every NIC at line
rate, needs REFERENCE_DILATION (by its switches' and agents' engines) on the reference machine (measured: the `make bench` figure
fabric_cpu_frac_at_line_rate, CPU per wall second at the fabric's dilation, is under
CPU_BUDGET there). A fabric with more frame-hops per second, or a slower machine,
needs proportionally more:

    dilation = max(1, REFERENCE_DILATION x frame_hops(spec) / frame_hops(default)
                      x speed(reference) / speed(here) x reference cores / cores here)

Proportionally is optimistic: a Python process's work per frame grows when frames come
further apart (its caches are cold after the other processes ran), so halving the
frames per wall second saves less than half the CPU; the reference point is measured,
not derived, for that reason.

The machine's speed is the CPU time of a fixed piece of packet-handling Python (parse,
look up, rewrite, as the switches and agents do per frame), against the same on the
reference machine. It is CPU time, not wall time: switches and agents run at real-time
priority, so other work on the machine does not slow them; only a slower CPU does.
"""

from __future__ import annotations

import functools
import os
import struct
import time

from topo.headers import ROCE_DATA_OVERHEAD
from topo.spec import FabricSpec, nic_choice

# Share of the machine the fabric may use at line rate (the rest absorbs bursts).
CPU_BUDGET = 0.5
# The dilation the default fabric's shape at 10 Mbit/s (_DEFAULT) needs on the reference
# machine (2 cores), by the engines that forward its frames: (switches, agents' NIC).
# Python both, measured on the idle machine (docs/fabric.md): fabric_cpu_frac_at_line_rate
# was 0.86-0.95 at dilation 1, 0.56-0.59 at 3 and 0.49 at 4.24 -- a wake-up costs these
# Python processes about twice the CPU after three times the idle time (cold caches on a
# shared host), so the budget is reached only above 4. The demo's runs are faithful from
# about 3 (at 2 and 1.5 the agents' handling of received frames was not: p99 1.3 and 4.0
# packet times). Native both (the C switch loop and the C NIC), the default shape at line
# rate: 0.38 of the machine at 10 Mbit/s and dilation 1 (load 4-5 from other work
# beside it), 0.55 at 15 Mbit/s and dilation 1, 0.495 at 20 Mbit/s and 1.5 (idle machine),
# so about 0.37 per 10 Mbit/s of wall-time rate: the budget holds at 0.74 of the 10
# Mbit/s frame rate (a number below 1: it scales up with the rate).
# The C engines need less now (`make bench`, 2026-12-07: 0.26 of a host 2.2x slower
# than the reference at dilation 1), but the dilation also paces what stays Python --
# GOR, the library -- so GOR's loop sets the native figure: `make demo` on that host kept
# its detect -> moved p99 under 0.265 s at 1.46 and 1.54 (0.23) but not at 1.29 (0.30;
# docs/fabric.md). A mix was not measured: it takes the Python figure (it dilates more,
# never less).
REFERENCE_DILATION = {("python", "python"): 4.0, ("native", "native"): 0.6}
REFERENCE_CORES = 2
# CPU seconds `_packet_work` takes there, idle: 15 runs fell in two groups, 0.037 and
# 0.052-0.061 s (the host shares its cores with other machines); the fast group is the
# reference, so a run in the slow group dilates more, never less.
REFERENCE_WORK_S = 0.037
# Frame-hops per second of the default fabric at line rate (`frame_hops`), for scaling.
_DEFAULT = FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=2)


def max_hops(spec: FabricSpec) -> int:
    """The most switches a frame crosses: leaf, spine, leaf; with three tiers leaf,
    spine, super-spine, spine, leaf."""
    return 2 * spec.tiers - 1


def frame_hops(spec: FabricSpec) -> float:
    """Frames per second all switches forward when every NIC sends at line rate (every
    frame on the longest path: the worst case a job can make)."""
    nics = spec.blocks * spec.servers_per_block * spec.rails
    frames_per_nic = spec.links.host_mbps * 1e6 / 8 / (spec.mtu + ROCE_DATA_OVERHEAD)
    return nics * frames_per_nic * max_hops(spec)


def _packet_work(rounds: int = 80000) -> float:
    """CPU seconds of a fixed per-frame workload (see the module docstring)."""
    frame = bytes(range(256)) * 4
    table = {i: (i * 7) & 0xFF for i in range(256)}
    header = struct.Struct("!6s6sH")
    start = time.process_time()
    acc = 0
    for i in range(rounds):
        dst, src, ethertype = header.unpack_from(frame, 0)
        key = int.from_bytes(frame[26:34], "big") ^ i
        acc += table[key & 0xFF] + ethertype
        frame = frame[:14] + bytes([acc & 0xFF]) + frame[15:]
    return time.process_time() - start


@functools.cache
def machine_slowdown() -> float:
    """How much slower than the reference machine this one runs packet work (>= 0).
    Measured once per process: it is CPU time, which other work does not change, and
    each measurement costs 0.5 s of a fabric's start (a test worker starts dozens)."""
    runs = sorted(_packet_work() for _ in range(5))
    return runs[2] / REFERENCE_WORK_S


def engines(spec: FabricSpec) -> tuple[str, str]:
    """The engines ``spec``'s frames go through, (switches, agents' NIC): "auto" is the
    native one (what the fabric runs where it builds; where it does not, the Python one
    runs at a dilation too low and the fidelity monitor says so)."""
    nic = nic_choice(spec)
    return (("python" if spec.switch_engine == "python" else "native"),
            ("python" if nic == "python" else "native"))


def dilation_for(spec: FabricSpec, slowdown: float | None = None) -> float:
    """The dilation that keeps ``spec``'s fabric at line rate within CPU_BUDGET here."""
    slowdown = machine_slowdown() if slowdown is None else slowdown
    cores = os.cpu_count() or 1
    reference = REFERENCE_DILATION.get(engines(spec), REFERENCE_DILATION["python", "python"])
    demand = (reference * frame_hops(spec) / frame_hops(_DEFAULT)
              * slowdown * REFERENCE_CORES / cores)
    return round(max(1.0, demand), 2)
