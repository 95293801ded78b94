"""Admission in arrival order: the switch's tail drop against a FIFO on a wire
(``admission_runs_as_fifo``, ``admission_h1_admitted_switch``, ``..._fifo``).

The P4 tutorials' ``ecn`` exercise, on one p4sim switch between namespaces: h11 floods
h2 with 1000-byte UDP frames at 1 Mbit/s through a 0.5 Mbit/s port (the queue fills and
tail-drops), while h1 sends 60 small ECT frames to h2, one every 0.1 s, into the same
queue. Every enqueue at that port is logged with its kernel arrival time and whether
the switch admitted it; the same arrival times are then fed to a FIFO with tail drop
on the ideal link (depth and rate of the port). A switch that admits in arrival order
(p4sim/switch/device.py, ``Device._handle``) admits exactly what the FIFO admits, in
every run, however its wake-ups fall; one that admits in the order it reads its rings
does not (issue 29 measured 2-16 of h1's frames against the FIFO's 13-18).

Program: tests/p4/good/ecn_mark.p4 (the tutorials' ecn: LPM forwarding, ECN from
``enq_qdepth``), run by the Python engine inside this process so the queue can be
watched; the switch's loop is the one ``p4sim switch`` runs.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from emulation.clock import EmulationClock
from p4sim.compiler import compile_file
from p4sim.switch.device import Device
from p4sim.switch.match import Lpm
from topo.namespaces import Netns

PROGRAM = Path(__file__).resolve().parents[1] / "tests" / "p4" / "good" / "ecn_mark.p4"
RUNS = 5
EGRESS = 3
LINK_BPS = 0.5e6            # s1-s2 of the exercise
FLOOD_BPS = 1e6             # iperf -u -b 1M
FLOOD_BYTES = 1000
PROBES = 60                 # h1's small ECT frames ...
PROBE_GAP_S = 0.1           # ... one every 0.1 s
SETTLE_S = 0.5              # the flood fills the queue before the first probe
H2 = "10.0.2.2"


def run() -> dict[str, float]:
    program = compile_file(str(PROGRAM)).bmv2_json
    matching, switch_h1, fifo_h1 = 0, [], []
    for _ in range(RUNS):
        log, depth = one_run(program)
        fifo = fifo_admits([(t, size) for t, _, size, _ in log], depth)
        admitted = [ok for _, _, _, ok in log]
        matching += admitted == fifo
        h1 = [i for i, (_, port, _, _) in enumerate(log) if port == 1]
        switch_h1.append(sum(admitted[i] for i in h1))
        fifo_h1.append(sum(fifo[i] for i in h1))
        print(f"#   h1 frames admitted: switch {switch_h1[-1]}, FIFO {fifo_h1[-1]} "
              f"(of {len(h1)}); all frames as the FIFO: {admitted == fifo}")
    return {"admission_runs_as_fifo": matching, "admission_runs": RUNS,
            "admission_h1_admitted_switch_mean": sum(switch_h1) / RUNS,
            "admission_h1_admitted_fifo_mean": sum(fifo_h1) / RUNS}


def one_run(program: dict) -> tuple[list[tuple[int, int, int, bool]], int]:
    """One exercise: every enqueue at the egress port as (arrival us, ingress port,
    bytes, admitted), in the order the switch handled them; and the queue depth."""
    with Netns() as ns:
        for host in ("sw", "h1", "h11", "h2"):
            ns.add_ns(host)
        ports = {1: ns.add_link("sw", "h1"), 2: ns.add_link("sw", "h11"), 3: ns.add_link("sw", "h2")}
        with ns.entered("sw"):
            device = Device({n: ends[0] for n, ends in ports.items()},
                            port_rates={EGRESS: LINK_BPS / 8}, clock=EmulationClock.start())
        try:
            engine = device.load_pipeline(program)
            engine.table_add("MyIngress.ipv4_lpm", "MyIngress.ipv4_forward",
                             [Lpm(0x0A000202, 32)], [0x000000000202, EGRESS])
            engine.register_write("MyEgress.ecn_threshold", 0, 10)
            log = _watch_egress(device)
            loop = threading.Thread(target=device.run, daemon=True)
            loop.start()
            try:
                _send(ns, ports)
                time.sleep(0.2)   # the last frames reach the switch
            finally:
                device.stop()
                loop.join(timeout=10)
            depth = device.tm.stats()[EGRESS]["depth"]
        finally:
            device.close()
    return log, depth


def _watch_egress(device: Device) -> list[tuple[int, int, int, bool]]:
    log: list[tuple[int, int, int, bool]] = []
    enqueue = device.tm.enqueue

    def watched(port, priority, item, arrival=None, size=0, in_port=None) -> bool:
        ok = enqueue(port, priority, item, arrival, size, in_port)
        if port == EGRESS:
            log.append((arrival, in_port, size, ok))
        return ok

    device.tm.enqueue = watched
    return log


def _send(ns: Netns, ports: dict[int, tuple[str, str]]) -> None:
    """The flood from h11 and h1's probes, each paced by its own thread."""
    def frame(src: str, size: int, tos: int) -> bytes:
        pkt = Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02") / \
            IP(src=src, dst=H2, tos=tos) / UDP(sport=5000, dport=5001)
        return bytes(pkt) + bytes(max(0, size - len(pkt)))

    flood_sock = ns.socket("h11", ports[2][1])
    probe_sock = ns.socket("h1", ports[1][1])
    flood = frame("10.0.1.11", FLOOD_BYTES, 0)
    probe = frame("10.0.1.1", 64, 1)   # ECT(1)
    end = time.monotonic() + SETTLE_S + PROBES * PROBE_GAP_S + 0.2

    def flood_loop() -> None:
        gap, t = FLOOD_BYTES * 8 / FLOOD_BPS, time.monotonic()
        while t < end:
            flood_sock.send(flood)
            t += gap
            time.sleep(max(0.0, t - time.monotonic()))

    flooder = threading.Thread(target=flood_loop)
    flooder.start()
    try:
        time.sleep(SETTLE_S)
        t = time.monotonic()
        for _ in range(PROBES):
            probe_sock.send(probe)
            t += PROBE_GAP_S
            time.sleep(max(0.0, t - time.monotonic()))
    finally:
        flooder.join()
        flood_sock.close()
        probe_sock.close()


def fifo_admits(arrivals: list[tuple[int, int]], depth: int) -> list[bool]:
    """A FIFO of ``depth`` frames with tail drop in front of an ideal link of the
    port's rate, fed (arrival us, bytes) in the order given: whether each was admitted.
    The link starts a frame once the previous one's serialisation is over (the
    traffic manager's schedule); the frame on the wire no longer counts."""
    order = sorted(range(len(arrivals)), key=lambda i: arrivals[i][0])
    queue: list[tuple[int, int]] = []
    free_at = 0.0
    admitted = [False] * len(arrivals)
    for i in order:
        t, size = arrivals[i]
        while queue and free_at <= t:
            start = max(queue[0][0], free_at)
            free_at = start + queue.pop(0)[1] * 8 / LINK_BPS * 1e6
        if len(queue) < depth:
            queue.append((t, size))
            admitted[i] = True
    return admitted
