"""The native engine against the Python engine (the reference), byte for byte.

astral.p4 with every switch's table entries of a fabric (leaves and spines) gets the
frame fuzzer's random and mutated frames (tests/test_switch_fuzz_frames.py) on every
port, with random queue metadata: both engines must send the same frames on the same
ports in the same order, hand the same jobs to the traffic manager, and end with the
same counters, direct counters, registers and digests. `random` (the 1-in-N sampling
of astral.p4, ECN marking) draws the same numbers in both: the native engine starts from
the state of Python's `random` (`NativeSwitch.seed_random_from_python`).
``P4SIM_FUZZ_FRAMES`` sets the number of frames per switch (`make fuzz`: 100 000).
"""

from __future__ import annotations

import os
import random

import pytest

from controller.routes import fabric_programs
from fabric_sim import compiled, install
from fuzzkit import count
from p4sim.switch.native.engine import NativeSwitch
from p4sim.switch.v1model import V1Switch
from test_switch_fuzz_frames import base_frames, mutate
from topo.addressing import CPU_PORT, AddressPlan
from topo.spec import FabricSpec

FRAMES = int(os.environ.get("P4SIM_FUZZ_FRAMES", "3000"))
SPEC = FabricSpec(blocks=2, servers_per_block=2, rails=2, spines=2, sample_rate=3)


class Clock:
    """The emulated microseconds both engines read: one step per frame."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def through(sw: V1Switch, port: int, frame: bytes, qdepth: int, clock: Clock) -> tuple[list, list]:
    """Frames out and the jobs handed to the traffic manager, FIFO as run_to_completion."""
    pending = list(sw.run_ingress(port, frame))
    jobs = [(j.port, j.priority, j.length) for j in pending]
    out = []
    for job in pending:
        sent, more = sw.run_egress(job, qdepth, qdepth // 2, clock.now, qdepth * 3)
        out += sent
        pending += more
        jobs += [(j.port, j.priority, j.length) for j in more]
    return out, jobs


def state(sw: V1Switch) -> dict:
    """Everything packets change, as the runtime API reads it."""
    out: dict = {}
    for name, arr in sw.counters.items():
        out[name] = [sw.counter_read(name, i) for i in range(arr.size)]
    for name, arr in sw.registers.items():
        out[name] = [sw.register_read(name, i) for i in range(arr.size)]
    for name, tbl in sw.tables.items():
        if tbl.with_counters:
            out[name] = [sw.table_counter_read(name, h) for h in sorted(tbl.entries)]
    out["digests"] = sw.pop_digests()
    return out


@pytest.mark.parametrize("switch", ["b0l0", "b1l1", "sp1"])
def test_native_engine_forwards_fuzzed_frames_as_python_does(switch: str) -> None:
    plan = AddressPlan(SPEC)
    program = fabric_programs(plan)[switch]
    bmv2 = compiled(SPEC.ecmp_hash)
    clock = Clock()
    random.seed(22)
    python = V1Switch(bmv2, cpu_port=CPU_PORT, clock=clock)
    random.seed(22)
    native = NativeSwitch(bmv2, cpu_port=CPU_PORT, clock=clock)
    for sw in (python, native):
        install(sw, program)
    rng = random.Random(switch)
    bases = base_frames()
    ports = sorted({hop.port for hop in program.next_hops}
                   | {r.port for r in program.routes if r.port is not None} | {1, CPU_PORT})
    differences = []
    for i in range(FRAMES):
        frame = bases[i] if i < len(bases) else mutate(rng, bases, 1)
        port, qdepth = rng.choice(ports), rng.randrange(40)
        clock.now += 1
        want = through(python, port, frame, qdepth, clock)
        got = through(native, port, frame, qdepth, clock)
        if got != want:
            differences.append((i, port, frame.hex(), want, got))
    count("native_frames", FRAMES)
    count("native_differences", len(differences))
    assert not differences, f"{len(differences)} frames differ, first: {differences[0]}"
    assert state(native) == state(python)
    assert any(state(python)[name] for name in python.counters), "no frame was counted"
