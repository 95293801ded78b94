"""Two DCQCN flows through one FIFO bottleneck, packet by packet, with no emulation: the
agents' own reaction point (`tccl.dcqcn.DcqcnRate`), the switches' RED marking on
enqueue (`fluid.marking`), the notification point's one CNP per flow per CNP interval
(DCQCN, section 3), an ideal link and a fixed CNP delay.

Why it exists: at the fabric's scale a flow sends ~2 frames per rate timer, where the
fluid model (`fluid`) assumes many, so the emulated shares of the two-flows check
wander about the model's (docs/validation.md, check 2). Run here, the same protocol
without the emulator shows whether that spread is the protocol's or the emulator's.
Not modelled: the agents' send window (it caps the emulated queue near 25 frames),
PFC, retransmission.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

import numpy as np

from experiments.validity.fluid import marking
from tccl.dcqcn import DcqcnParams, DcqcnRate
from topo.spec import EcnProfile


@dataclass(frozen=True)
class PacketRun:
    """One run's outcome after the second flow joined: the first flow's share of the
    packets delivered, the link's use, and the queue (packets) each packet found."""

    first_share: float
    link_use: float
    queue: np.ndarray


def two_flows(params: DcqcnParams, ecn: EcnProfile, capacity_bps: float, packet_bytes: int,
              join_s: float, end_s: float, cnp_delay_s: float, seed: int) -> PacketRun:
    """Flow 0 from 0 s, flow 1 from ``join_s``, both at line rate (section 3: no slow
    start) until ``end_s``; marks drawn from ``random.Random(seed)``."""
    if not 0 < join_s < end_s:
        raise ValueError(f"packets.two_flows: need 0 < join_s < end_s, got {join_s}, {end_s}")
    draw = random.Random(seed)
    bits = packet_bytes * 8
    starts = (0.0, join_s)
    rates: list[DcqcnRate | None] = [None, None]
    last_cnp = [-params.cnp_interval] * 2
    delivered = [0, 0]
    queue: list[int] = []
    events: list[tuple[float, int, str, int, bool]] = []    # time, order, kind, flow, marked
    order = 0

    def push(t: float, kind: str, flow: int, marked: bool = False) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (t, order, kind, flow, marked))

    for flow, start in enumerate(starts):
        push(start, "send", flow)
    depth, link_free = 0, 0.0
    while events:
        t, _, kind, flow, marked = heapq.heappop(events)
        if t > end_s:
            break
        if kind == "send":
            rate = rates[flow] = rates[flow] or DcqcnRate(params, t)
            rate.advance(t)
            if t >= join_s:
                queue.append(depth)
            mark = draw.random() < float(marking(depth, ecn))
            depth += 1
            link_free = max(t, link_free) + bits / capacity_bps
            push(link_free, "leave", flow, mark)
            rate.on_sent(packet_bytes, t)
            push(t + bits / rate.rc, "send", flow)
        elif kind == "leave":
            depth -= 1
            if t >= join_s:
                delivered[flow] += 1
            if marked and t - last_cnp[flow] >= params.cnp_interval:
                last_cnp[flow] = t
                push(t + cnp_delay_s, "cnp", flow)
        else:
            rate = rates[flow]
            assert rate is not None      # a CNP answers a packet the flow sent
            rate.on_cnp(t)
    total = sum(delivered)
    return PacketRun(delivered[0] / max(1, total), total * bits / (end_s - join_s) / capacity_bps,
                     np.asarray(queue, dtype=float))
