"""The flow-level model: a job's steps on the fabric, step by step.

For every collective step: the flows with the ports the agents pick (`scale.flows`),
after GOR's moves when GOR is on (`scale.gor`); their paths from the hash model
(`scale.fabric`); max-min fair rates (`controller.fairness`, a ring's flows coupled into
one rate); and the step's time. A ring collective moves in lock step, so a step runs
at the pace of its slowest flow (the flow whose bytes take longest at its rate); a
connection carries ``bus_factor x size`` bytes (``size / n`` to each peer for
all-to-all), in messages that fall whole on its QPs, round robin (`scale.messages`):
a step of one message per connection moves on one QP at the NIC's rate, and which
one changes from iteration to iteration, so the model runs as many iterations as a
connection has QPs (or the trace has, if fewer). On top of the bytes, what a perfect emulation of these links
still costs (`step_seconds`): the frame headers (a link carries mtu + 58 bytes per
mtu of payload), and the step's pipeline fill -- every frame is stored and forwarded
by each switch on its path, and a rank forwards a slice
(`tccl.collectives.SLICE_BYTES`) only once it has all of it, which delays the step
where nothing else keeps its NIC busy meanwhile (`scale.messages.waiting_slice`). So the model's busbw fraction is
sum(ideal) / sum(ideal x share / header efficiency + fill), ``share`` being the line
rate over what the slowest flow's rate moves of the step's bytes: the busbw a perfect
emulation of the fabric gives, which the demo sets its measurement against.

A **collision** is a flow more on a fabric link than the link takes without slowing
any of them down: a switch sending F flows up through k links needs ceil(F/k) on its
busiest one (the same for the flows into a switch on its downlinks), and a link
carries one connection's q QPs at full pace; `excess` sums the flows beyond
max(q, ceil(F/k)) over the links. Only the QPs that carry a message of the step count
(F, and q: the most of one connection that do).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from controller.config import GorConfig
from experiments.configs import CONFIGS, Config, configured, hostfile_job
from experiments.metrics import StepCost, compute_seconds, step_costs
from tccl.job import Job, Transport
from tccl.trace import Trace, load_trace
from topo.addressing import AddressPlan
from topo.headers import ROCE_DATA_OVERHEAD
from topo.spec import load_spec

from scale.fabric import FabricIndex
from controller.fairness import Allocation, max_min_rates
from scale.flows import StepFlows, StepLayout, job_step_flows, step_layout
from scale.gor import replan
from scale.messages import messages_before, qp_messages, step_messages, waiting_slice


def step_seconds(cost: StepCost, share: float, hops: int, mtu: int) -> float:
    """A network step's time on a perfect emulation (module doc): its bytes at
    ``share`` times their line-rate time, through the frame headers, plus the pipeline
    fill: one frame per switch hop, and a slice where a rank waits for one
    (`waiting_slice`)."""
    frame = mtu + ROCE_DATA_OVERHEAD
    efficiency = mtu / frame
    slice_s = waiting_slice(cost.op, cost.ranks, cost.size) * 8 / cost.rate_bps / efficiency
    return cost.ideal_s * share / efficiency + slice_s + hops * frame * 8 / cost.rate_bps


def connection_bytes(cost: StepCost) -> float:
    """Bytes one connection of the step carries (module doc), over its QPs as its
    messages fall on them (`scale.messages`)."""
    if cost.ranks < 2:
        return 0.0
    per_connection = cost.ideal_s * cost.rate_bps / 8
    if cost.op == "alltoall":
        per_connection /= cost.ranks - 1
    return per_connection


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
    iteration: int = 0             # of the evaluation's iterations


@dataclass(frozen=True)
class Evaluation:
    """A job under one configuration: its steps and per-iteration figures."""

    config: str
    gpus: int
    steps: tuple[StepResult, ...]  # iteration by iteration
    iteration_s: float             # their mean
    busbw_frac: float
    iterations: int = 1
    moves: int = 0                 # flows GOR moved, its planning iterations included

    @property
    def collisions(self) -> int:
        """The collisions of the iteration with the most."""
        per = [0] * self.iterations
        for s in self.steps:
            per[s.iteration] += s.collisions
        return max(per)

    @property
    def max_flows_per_link(self) -> int:
        return max((s.max_flows_per_link for s in self.steps), default=0)

    def summary(self) -> dict[str, float | int]:
        return {"gpus": self.gpus, "iteration_s": self.iteration_s, "busbw_frac": self.busbw_frac,
                "collisions": self.collisions, "max_flows_per_link": self.max_flows_per_link,
                "gor_moves": self.moves}


def evaluate_job(index: FabricIndex, job: Job, trace: Trace, gor: bool = False,
                 gor_config: GorConfig = GorConfig(), name: str = "",
                 flows: list[StepFlows] | None = None) -> Evaluation:
    """The model of ``job`` running ``trace``: per step and per iteration (module doc),
    over the iterations in which the connections' messages fall on their QPs
    differently (`scale.messages`: as many as a connection has QPs, or as the trace
    has if fewer); with ``gor``, GOR's steady state -- each step timed after GOR has
    planned it, and with several such iterations all of them once more.
    ``flows``: the job's `job_step_flows`, if the caller has them (configurations
    that differ only in GOR share them)."""
    spec = index.plan.spec
    t = job.transport
    bottleneck = min(spec.links.host_mbps, spec.links.uplink_mbps) * 1e6
    costs = step_costs(trace, job.ranks, bottleneck, 0.0)
    nvlink_costs = step_costs(trace, job.ranks, bottleneck, t.nvlink_gbps * 1e9)
    ranks = len(job.ranks)
    steps_flows = flows or job_step_flows(index, job, trace)
    before, per_iteration = messages_before(steps_flows, costs, ranks, t.qps)
    state = _GorState() if gor else None
    cache: dict[bytes, tuple[StepResult, np.ndarray]] = {}
    period = max(1, min(t.qps, trace.iterations))
    # GOR plans each step's flows before the model times them; with several patterns of
    # QPs, a later one's moves may disturb an earlier one's: those are timed again.
    warmup = period if gor and period > 1 else 0
    steps = []
    ideal = paced = iteration = 0.0
    for k in range(warmup + period):
        counted = k >= warmup
        iteration += compute_seconds(trace) if counted else 0.0
        for s, (fl, cost, channel) in enumerate(zip(steps_flows, costs, nvlink_costs)):
            if not len(fl):
                if counted:
                    iteration += channel.ideal_s
                    steps.append(_idle_step(cost, len(index.fabric_links), k - warmup))
                continue
            carried = qp_messages(step_messages(cost.op, cost.ranks, cost.size),
                                  before[s] + k * per_iteration[s], fl.qp, t.qps)
            result = _network_step(index, fl, cost, carried, t, ranks, s, state, gor_config, cache)
            if counted:
                result = replace(result, iteration=k - warmup)
                steps.append(result)
                ideal += cost.ideal_s
                paced += result.seconds
                iteration += result.seconds
    return Evaluation(name or job.name, len(job.ranks), tuple(steps), iteration / period,
                      ideal / paced if paced else 1.0, period, state.moves if state else 0)


class _GorState:
    """GOR's ports stay for the job's life: the flows it moved (by `_flow_keys`,
    sorted) and their ports, as columns (a 100k-GPU step has 200k flows: no per-flow
    Python)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.ports = np.zeros(0, dtype=np.int64)
        self.moves = 0

    def ports_of(self, keys: np.ndarray, sports: np.ndarray) -> np.ndarray:
        """``sports`` with GOR's port wherever it moved the flow."""
        if not len(self.keys):
            return sports
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.ports[at], sports)

    def moved(self, keys: np.ndarray, ports: np.ndarray) -> None:
        """The flows ``keys`` now on ``ports`` (the latest move of a flow wins)."""
        self.moves += len(keys)
        self.keys, first = np.unique(np.concatenate([keys, self.keys]), return_index=True)
        self.ports = np.concatenate([ports, self.ports])[first]


def _network_step(index: FabricIndex, flows: StepFlows, cost: StepCost, carried: np.ndarray, t: Transport,
                  ranks: int, step: int, gor: "_GorState | None", gor_config: GorConfig,
                  cache: dict[bytes, tuple[StepResult, np.ndarray]]) -> StepResult:
    """One network step whose flows carry ``carried`` messages each (idle QPs none):
    GOR's moves of the flows that send (with ``gor``), max-min fair rates, the time of
    the flow that finishes last."""
    messages = step_messages(cost.op, cost.ranks, cost.size)     # a connection's: min(qps, them) QPs send
    active = np.flatnonzero(carried > 0)
    keys = _flow_keys(flows, ranks, t.qps)[active]
    sports = flows.sport[active] if gor is None else gor.ports_of(keys, flows.sport[active])
    src, dst, unit = flows.src[active], flows.dst[active], flows.unit[active]
    key = b"/".join((str(step).encode(), carried.tobytes(), sports.tobytes()))
    if key in cache:
        result, planned = cache[key]
    else:
        moves = 0
        planned = sports
        if gor is not None:
            plan = replan(index, src, dst, sports, gor_config)
            moves, planned = plan.moves, plan.sports
        paths = index.paths(src, dst, planned)
        alloc = max_min_rates(paths.links, index.capacity_bps, unit)
        bits = connection_bytes(cost) * 8 * carried[active] / messages
        share = float((bits / alloc.rates).max()) / cost.ideal_s
        seconds = step_seconds(cost, share, int(paths.switch_hops.max()), t.mtu)
        fabric = index.fabric_links
        link_flows, link_util = _on_fabric(index, fabric, alloc)
        result = StepResult(cost.op, cost.group, cost.size, len(active),
                            int((paths.switch_hops > 1).sum()), cost.ideal_s, seconds, float(alloc.rates.min()),
                            excess(index, fabric, link_flows, min(t.qps, messages)),
                            int(link_flows.max(initial=0)), moves, link_flows, link_util)
        cache[key] = (result, planned)
    if gor is not None:
        changed = planned != sports
        gor.moved(keys[changed], planned[changed])
    return result


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


def _idle_step(cost: StepCost, fabric_links: int, iteration: int) -> StepResult:
    """A step with no network flow (NVLink only)."""
    return StepResult(cost.op, cost.group, cost.size, 0, 0, cost.ideal_s, 0.0, 0.0, 0, 0, 0,
                      np.zeros(fabric_links, dtype=np.int64), np.zeros(fabric_links), iteration)


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
