"""What the hash model predicts for a job: which fabric links each step's flows share.

For every collective step of the trace, the flows that cross the network (NVLink pairs
excluded; one flow per QP when connections run several) get the source ports the
agents will use (`tccl.agent.port_function`, the
same deterministic plan every agent makes) and the path `topo.hashmodel` predicts for
them (bit-exact with the switches). Then, per directed leaf-spine link:

* a **collision** is a flow more on a link than the link takes without slowing any of
  them down: a leaf sending F QP flows through k spines needs ceil(F/k) on its busiest
  uplink (the same for the flows into a leaf on the spines' downlinks), and a link
  carries one connection's q QPs at full pace; `collisions` sums the flows beyond
  max(q, ceil(F/k)) over the links;
* the step runs at the pace of its most shared link (ring collectives move in lock
  step; every flow of a step is as large as the others; a connection's data is split
  evenly over its q QPs, so a link may carry q QP flows at full pace);
* on top of that, what a perfect emulation of these links still costs: the frame
  headers (a link carries mtu + 58 bytes per mtu of payload), and the step's pipeline
  fill -- a ring rank forwards a slice (`tccl.collectives.SLICE_BYTES`) only once it
  has all of it, and each frame is stored and forwarded by every switch on its path,
  so a step takes one slice time plus one frame time per switch hop more than its
  bytes alone.

So the model's busbw fraction is sum(ideal) / sum(ideal x max(1, QP flows on the
step's busiest link / q) / header efficiency + slice time + hops x frame time) -- the
busbw a perfect emulation of this fabric gives, which the measurement is set against.

`expected_random` repeats the count over many seeds of random ports (the stock
library's draw), the average a stock job meets.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

from experiments.metrics import StepCost, step_costs
from tccl import collectives as C
from tccl import trace as T
from tccl.agent import port_function
from tccl.job import Job
from topo.addressing import AddressPlan
from topo.headers import ROCE_DATA_OVERHEAD
from topo.hashmodel import FiveTuple, predict_path


def step_flows(job: Job, trace: T.Trace) -> list[list[tuple[int, int, int]]]:
    """Per collective step, the (src, dst, QP index) flows that cross the network."""
    ranks = {r.rank: r for r in job.ranks}
    nvlink = job.transport.nvlink_gbps > 0
    out = []
    for step in trace.steps:
        if step.op is None:
            continue
        if step.group == "pp":
            pairs = T.pp_pairs(job.ranks)
        else:
            pairs = []
            for g in T.groups(step.group, job.ranks):
                ring = C.ring_order(g, job.workload.order)
                pairs += ([(a, b) for a in ring for b in ring if a != b] if step.op == "alltoall"
                          else C.ring_flows(ring))
        out.append([(a, b, i) for a, b in pairs if not (nvlink and ranks[a].server == ranks[b].server)
                    for i in range(job.transport.qps)])
    return out


def link_loads(plan: AddressPlan, job: Job, flows: list[tuple[int, int, int]], port: Any) -> Counter:
    """QP flows per directed link (``(a, b)``) of the predicted paths; ``port(src, dst,
    index)`` is the agents' port plan."""
    ranks = {r.rank: r for r in job.ranks}
    loads: Counter = Counter()
    for a, b, i in flows:
        path = predict_path(plan, FiveTuple(ranks[a].ip, ranks[b].ip, sport=port(a, b, i)))
        loads.update(zip(path, path[1:]))
    return loads


def excess(plan: AddressPlan, loads: Counter, qps: int = 1) -> int:
    """QP flows on leaf-spine links beyond what they carry at full pace (module doc)."""
    leaves = {l.name for l in plan.leaves}
    spines = {s.name for s in plan.spines}
    k = len(spines)
    up: Counter = Counter()
    down: Counter = Counter()
    for (a, b), n in loads.items():
        if a in leaves and b in spines:
            up[a] += n
        elif a in spines and b in leaves:
            down[b] += n
    total = 0
    for (a, b), n in loads.items():
        if a in leaves and b in spines:
            total += max(0, n - max(qps, math.ceil(up[a] / k)))
        elif a in spines and b in leaves:
            total += max(0, n - max(qps, math.ceil(down[b] / k)))
    return total


def step_seconds(cost: StepCost, share: float, hops: int, mtu: int) -> float:
    """A network step's time on a perfect emulation (module doc): its bytes at the
    share of the link its busiest link leaves each flow, through the frame headers,
    plus the pipeline fill of one slice and one frame per switch hop."""
    frame = mtu + ROCE_DATA_OVERHEAD
    efficiency = mtu / frame
    part = cost.size / max(1, cost.ranks) if cost.group != "pp" else cost.size
    slice_s = min(C.SLICE_BYTES, part) * 8 / cost.rate_bps / efficiency
    return cost.ideal_s * share / efficiency + slice_s + hops * frame * 8 / cost.rate_bps


def analyse(plan: AddressPlan, job: Job, trace: T.Trace) -> dict[str, Any]:
    """``collisions`` (summed over steps), the most QP flows on one leaf-spine link,
    and the model's busbw fraction, for the job's own ports."""
    ring = C.ring_order(job.ranks, job.workload.order)
    port, _ = port_function(job, ring, trace)
    spines = {s.name for s in plan.spines}
    switches = {s.name for s in plan.switches}
    bottleneck = min(plan.spec.links.host_mbps, plan.spec.links.uplink_mbps) * 1e6
    costs = step_costs(trace, job.ranks, bottleneck, 0.0)
    collisions = worst_fabric = 0
    ideal = paced = 0.0
    for flows, cost in zip(step_flows(job, trace), costs):
        loads = link_loads(plan, job, flows, port)
        collisions += excess(plan, loads, job.transport.qps)
        fabric = [n for (a, b), n in loads.items() if a in spines or b in spines]
        worst_fabric = max([worst_fabric, *fabric])
        if flows:
            ideal += cost.ideal_s
            paced += step_seconds(cost, max(1.0, max(loads.values()) / job.transport.qps),
                                  _hops(plan, job, flows, port, switches), job.transport.mtu)
    return {"collisions": collisions, "max_flows_per_link": worst_fabric,
            "model_busbw_frac": ideal / paced if paced else 1.0}


def _hops(plan: AddressPlan, job: Job, flows: list[tuple[int, int, int]], port: Any,
          switches: set[str]) -> int:
    """The most switches any of the step's flows crosses (store-and-forward hops)."""
    ranks = {r.rank: r for r in job.ranks}
    return max(sum(1 for node in predict_path(plan, FiveTuple(ranks[a].ip, ranks[b].ip,
                                                              sport=port(a, b, i)))
                   if node in switches)
               for a, b, i in flows)


def expected_random(plan: AddressPlan, job: Job, trace: T.Trace, seeds: int = 100) -> float:
    """Mean `collisions` of the job over ``seeds`` draws of random source ports."""
    total = 0
    for s in range(seeds):
        t = dataclasses.replace(job.transport, ports="random", seed=10_000 + s)
        total += analyse(plan, dataclasses.replace(job, transport=t), trace)["collisions"]
    return total / seeds
