"""Packets/s of the v1model engine alone (no I/O) on the fabric program: LPM + ECMP
(hash + next-hop table) + ECN marking, every packet a RoCEv2 frame taking the ECMP
path with a queue deep enough that the ECN table is consulted.
(``pipeline_kpps_64B``, ``pipeline_kpps_1000B``: the Python engine), and the same run
per frame for both engines side by side (``switch_pipeline_ns_native``,
``switch_pipeline_ns_python``, 1000 B frames, ingress + egress through the engines'
Python API; ``switch_pipeline_native_speedup`` their ratio; ``switch_pipeline_ns_native_c``
the generated pipeline run from C, as the native packet loop runs it)."""

from __future__ import annotations

import time
from pathlib import Path

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.compiler import compile_file
from p4sim.switch.match import Exact, Lpm, Range
from p4sim.switch.native.engine import NativeSwitch
from p4sim.switch.v1model import V1Switch, run_to_completion

ROOT = Path(__file__).resolve().parent.parent
PACKETS = 20000
FLOWS = 64  # distinct source ports, so ECMP spreads them


def _switch(engine: type[V1Switch] = V1Switch) -> V1Switch:
    program = compile_file(str(ROOT / "p4src" / "astral.p4"))
    sw = engine(program.bmv2_json)
    sw.table_set_default("AstralIngress.switch_config", "AstralIngress.set_switch_config", [0x5A17, 1, 0])
    sw.table_add("AstralIngress.ipv4_lpm", "AstralIngress.ecmp_select", [Lpm(0x0A000000, 8)], [1, 4])
    for index in range(4):
        sw.table_add("AstralIngress.ecmp_nhop", "AstralIngress.forward",
                     [Exact(1), Exact(index)], [10 + index, 0x02000000AA00 + index])
    sw.table_add("AstralEgress.ecn_threshold", "AstralEgress.set_mark_threshold", [Range(0, 1000)], [0], priority=1)
    return sw


def _frames(size: int) -> list[bytes]:
    frames = []
    for flow in range(FLOWS):
        head = (Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
                / IP(src="10.1.0.1", dst="10.2.0.1", tos=0x02, ttl=64)
                / UDP(sport=49152 + flow, dport=4791) / BTH(opcode=4, dqpn=17, psn=flow))
        raw = bytes(head)
        frames.append(raw + bytes(max(size - len(raw), 0)))
    return frames


def _kpps(sw: V1Switch, frames: list[bytes]) -> float:
    for frame in frames:  # warm-up: first packet of each flow
        run_to_completion(sw, 1, frame)
    started = time.perf_counter()
    for i in range(PACKETS):
        run_to_completion(sw, 1, frames[i % FLOWS])
    return PACKETS / (time.perf_counter() - started) / 1000.0


def run() -> dict[str, float]:
    sw = _switch()
    out = run_to_completion(sw, 1, _frames(64)[0])
    assert out and out[0][0] in (10, 11, 12, 13), f"benchmark program does not forward: {out}"
    figures = {f"pipeline_kpps_{size}B": _kpps(sw, _frames(size)) for size in (64, 1000)}
    native = _switch(NativeSwitch)
    frames = _frames(1000)
    assert run_to_completion(native, 1, frames[0]) == run_to_completion(sw, 1, frames[0])
    for name, engine in (("python", sw), ("native", native)):
        figures[f"switch_pipeline_ns_{name}"] = 1e6 / _kpps(engine, frames)
    figures["switch_pipeline_native_speedup"] = (figures["switch_pipeline_ns_python"]
                                                 / figures["switch_pipeline_ns_native"])
    figures["switch_pipeline_ns_native_c"] = _c_ns(native, frames)
    return figures


def _c_ns(sw: NativeSwitch, frames: list[bytes]) -> float:
    """ns per frame of the generated pipeline run from C (`p4n_run_batch`): what it
    costs the native packet loop, without a Python call per frame."""
    lib, batch = sw._lib, b"".join(frames)
    n = len(frames)
    sent = lib.p4n_run_batch(sw.pipeline, 1, batch, len(frames[0]), n, 0)  # warm-up
    assert sent == n, f"native pipeline sent {sent} of {n} frames"
    rounds = PACKETS * 5 // n
    started = time.perf_counter()
    for _ in range(rounds):
        lib.p4n_run_batch(sw.pipeline, 1, batch, len(frames[0]), n, 0)
    return (time.perf_counter() - started) / (rounds * n) * 1e9
