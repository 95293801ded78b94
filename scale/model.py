"""The flow-level model: a job's steps on the fabric, step by step.

For every collective step: the flows with the ports the agents pick (`scale.flows`),
after GOR's moves when GOR is on (`scale.gor`); their paths from the hash model
(`scale.fabric`); max-min fair rates (`controller.fairness`, a ring's flows coupled into
one rate); and the step's time. A ring collective moves in lock step, so a step runs
at the pace of its slowest flow; a
connection's data is split evenly over its QPs, so that flow carries
``bus_factor x size / QPs`` bytes (``size / n / QPs`` to each peer for all-to-all).
On top of the bytes, what a perfect emulation of these links still costs
(`step_seconds`): the frame headers (a link carries mtu + 58 bytes per mtu of
payload), and the step's pipeline fill -- a ring rank forwards a slice
(`tccl.collectives.SLICE_BYTES`) only once it has all of it, and every frame is stored
and forwarded by each switch on its path. So the model's busbw fraction is
sum(ideal) / sum(ideal x share / header efficiency + fill), ``share`` being the line
rate over what the slowest flow's rate moves of the step's bytes: the busbw a perfect
emulation of the fabric gives, which the demo sets its measurement against.

A **collision** is a flow more on a fabric link than the link takes without slowing
any of them down: a switch sending F flows up through k links needs ceil(F/k) on its
busiest one (the same for the flows into a switch on its downlinks), and a link
carries one connection's q QPs at full pace; `excess` sums the flows beyond
max(q, ceil(F/k)) over the links.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from controller.config import GorConfig
from experiments.configs import CONFIGS, Config, configured, hostfile_job
from experiments.metrics import StepCost, compute_seconds, step_costs
from tccl import collectives as C
from tccl.job import Job
from tccl.trace import Trace, load_trace
from topo.addressing import AddressPlan
from topo.headers import ROCE_DATA_OVERHEAD
from topo.spec import load_spec

from scale.fabric import FabricIndex
from controller.fairness import Allocation, max_min_rates
from scale.flows import StepFlows, StepLayout, job_step_flows, step_layout
from scale.gor import replan


def step_seconds(cost: StepCost, share: float, hops: int, mtu: int) -> float:
    """A network step's time on a perfect emulation (module doc): its bytes at
    ``share`` times their line-rate time, through the frame headers, plus the pipeline
    fill of one slice and one frame per switch hop."""
    frame = mtu + ROCE_DATA_OVERHEAD
    efficiency = mtu / frame
    part = cost.size / max(1, cost.ranks) if cost.group != "pp" else cost.size
    slice_s = min(C.SLICE_BYTES, part) * 8 / cost.rate_bps / efficiency
    return cost.ideal_s * share / efficiency + slice_s + hops * frame * 8 / cost.rate_bps


def flow_bytes(cost: StepCost, qps: int) -> float:
    """Bytes one QP flow of the step carries (module doc)."""
    if cost.ranks < 2:
        return 0.0
    per_connection = cost.ideal_s * cost.rate_bps / 8
    if cost.op == "alltoall":
        per_connection /= cost.ranks - 1
    return per_connection / qps


def excess(index: FabricIndex, links: np.ndarray, flows: np.ndarray, qps: int = 1) -> int:
    """Flows on fabric links (ids ``links``, counts ``flows``) beyond what they carry at
    full pace (module doc)."""
    links, flows = np.asarray(links, dtype=np.int64), np.asarray(flows, dtype=np.int64)
    keep = index.is_fabric(links)
    links, flows = links[keep], flows[keep]

    def ends(ids: np.ndarray) -> np.ndarray:
        """A link's switch and direction: (lower end, up) or (upper end, down)."""
        a, b = np.divmod(ids, index.nodes)
        up = index.tiers[a] < index.tiers[b]
        return np.where(up, a, b) * 2 + up

    ways = np.bincount(ends(index.fabric_links), minlength=2 * index.nodes)
    mine = ends(links)
    total = np.bincount(mine, weights=flows, minlength=2 * index.nodes)
    need = np.maximum(qps, np.ceil(total[mine] / np.maximum(ways[mine], 1)))
    return int(np.maximum(0, flows - need).sum())


@dataclass(frozen=True)
class StepResult:
    """One collective step: its flows, what they share, its time."""

    op: str
    group: str
    size: int
    flows: int
    crossing: int                  # flows through the fabric (not within one leaf)
    ideal_s: float
    seconds: float                 # on the network (0 for steps on NVLink only)
    min_rate_bps: float
    collisions: int
    max_flows_per_link: int        # on a fabric link
    moves: int                     # flows GOR moved
    # Per fabric link (every one, idle ones included): flows and utilisation.
    link_flows: np.ndarray = field(repr=False)
    link_util: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class Evaluation:
    """A job under one configuration: its steps and per-iteration figures."""

    config: str
    gpus: int
    steps: tuple[StepResult, ...]
    iteration_s: float
    busbw_frac: float

    @property
    def collisions(self) -> int:
        return sum(s.collisions for s in self.steps)

    @property
    def max_flows_per_link(self) -> int:
        return max((s.max_flows_per_link for s in self.steps), default=0)

    @property
    def moves(self) -> int:
        return sum(s.moves for s in self.steps)

    def summary(self) -> dict[str, float | int]:
        return {"gpus": self.gpus, "iteration_s": self.iteration_s, "busbw_frac": self.busbw_frac,
                "collisions": self.collisions, "max_flows_per_link": self.max_flows_per_link,
                "gor_moves": self.moves}


def evaluate_job(index: FabricIndex, job: Job, trace: Trace, gor: bool = False,
                 gor_config: GorConfig = GorConfig(), name: str = "",
                 flows: list[StepFlows] | None = None) -> Evaluation:
    """The model of ``job`` running ``trace`` (one iteration; GOR's steady state when
    ``gor``): per step and per iteration (module doc). ``flows``: the job's
    `job_step_flows`, if the caller has them (configurations that differ only in GOR
    share them)."""
    spec = index.plan.spec
    t = job.transport
    bottleneck = min(spec.links.host_mbps, spec.links.uplink_mbps) * 1e6
    costs = step_costs(trace, job.ranks, bottleneck, 0.0)
    nvlink_costs = step_costs(trace, job.ranks, bottleneck, t.nvlink_gbps * 1e9)
    # GOR's ports stay for the job's life: the flows it moved (by `_flow_keys`, sorted)
    # and their ports, as columns (a 100k-GPU step has 200k flows: no per-flow Python).
    moved_keys = np.zeros(0, dtype=np.int64)
    moved_ports = np.zeros(0, dtype=np.int64)
    ranks = len(job.ranks)
    steps = []
    ideal = paced = 0.0
    iteration = compute_seconds(trace)
    fabric = index.fabric_links
    for flows, cost, channel in zip(flows or job_step_flows(index, job, trace), costs, nvlink_costs):
        if not len(flows):
            iteration += channel.ideal_s
            steps.append(_idle_step(cost, len(fabric)))
            continue
        sports = flows.sport
        moves = 0
        if gor:
            keys = _flow_keys(flows, ranks, t.qps)
            at = np.minimum(np.searchsorted(moved_keys, keys), max(len(moved_keys) - 1, 0))
            hit = moved_keys[at] == keys if len(moved_keys) else np.zeros(len(keys), dtype=bool)
            sports = np.where(hit, moved_ports[at] if len(moved_ports) else 0, flows.sport)
            plan = replan(index, flows.src, flows.dst, sports, gor_config)
            moves = plan.moves
            changed = plan.sports != sports
            moved_keys, first = np.unique(np.concatenate([keys[changed], moved_keys]), return_index=True)
            moved_ports = np.concatenate([plan.sports[changed], moved_ports])[first]
            sports = plan.sports
        paths = index.paths(flows.src, flows.dst, sports)
        alloc = max_min_rates(paths.links, index.capacity_bps, flows.unit)
        slowest = float(alloc.rates.min())
        share = flow_bytes(cost, t.qps) * 8 / slowest / cost.ideal_s
        seconds = step_seconds(cost, share, int(paths.switch_hops.max()), t.mtu)
        link_flows, link_util = _on_fabric(index, fabric, alloc)
        steps.append(StepResult(cost.op, cost.group, cost.size, len(flows),
                                int((paths.switch_hops > 1).sum()), cost.ideal_s, seconds, slowest,
                                excess(index, fabric, link_flows, t.qps),
                                int(link_flows.max(initial=0)), moves, link_flows, link_util))
        ideal += cost.ideal_s
        paced += seconds
        iteration += seconds
    return Evaluation(name or job.name, len(job.ranks), tuple(steps), iteration,
                      ideal / paced if paced else 1.0)


def _flow_keys(flows: StepFlows, ranks: int, qps: int) -> np.ndarray:
    """One integer per flow (source rank, destination rank, QP index): what a moved
    flow is known by from step to step."""
    return (flows.src_rank * ranks + flows.dst_rank) * qps + flows.qp


def _on_fabric(index: FabricIndex, fabric: np.ndarray, alloc: Allocation) -> tuple[np.ndarray, np.ndarray]:
    """Flows and utilisation of every fabric link (ids ``fabric``, sorted), idle or not."""
    flows = np.zeros(len(fabric), dtype=np.int64)
    load = np.zeros(len(fabric))
    at = np.searchsorted(fabric, alloc.links)
    hit = (at < len(fabric)) & (fabric[np.minimum(at, len(fabric) - 1)] == alloc.links)
    flows[at[hit]] = alloc.flows_per_link[hit]
    load[at[hit]] = alloc.load_bps[hit]
    return flows, load / index.capacity_bps(fabric)


def _idle_step(cost: StepCost, fabric_links: int) -> StepResult:
    """A step with no network flow (NVLink only)."""
    return StepResult(cost.op, cost.group, cost.size, 0, 0, cost.ideal_s, 0.0, 0.0, 0, 0, 0,
                      np.zeros(fabric_links, dtype=np.int64), np.zeros(fabric_links))


def evaluate(spec_file: str | Path, trace_file: str | Path, configs: list[Config] | None = None,
             seed: int = 1) -> dict[str, Evaluation]:
    """Every configuration (default: the demo's five) of the demo's job on a fabric
    spec and a trace file."""
    index = FabricIndex(AddressPlan(load_spec(spec_file, emulated=False), emulated=False))
    trace = load_trace(trace_file)
    out = {}
    base = hostfile_job(spec_file, trace_file, seed, emulated=False)
    planned: dict[tuple[str, str], list[StepFlows]] = {}     # by (ring order, port mode)
    layouts: dict[str, StepLayout] = {}                         # by ring order
    for c in configs or list(CONFIGS.values()):
        job = configured(base, c)
        key = (c.order, c.ports)
        if key not in planned:
            if c.order not in layouts:
                layouts[c.order] = step_layout(index, job, trace)
            planned[key] = job_step_flows(index, job, trace, layouts[c.order])
        out[c.name] = evaluate_job(index, job, trace, c.gor, name=c.name, flows=planned[key])
    return out
