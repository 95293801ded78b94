"""The flows of a job's collective steps, with the source ports its agents would use.

A configuration's job is the demo's (`experiments.configs.build_job`: the same ranks,
ring orders, QPs and port mode), its ports are the agents' own plan
(`tccl.agent.planned_ports`: random, or hash-orthogonal through `tccl.ports`), and the
flows of a step are the pairs its groups' rings (or pipeline sends) connect
(`tccl.trace`, `tccl.collectives`), one flow per QP, NVLink pairs left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tccl import trace as T
from tccl.agent import planned_ports, step_flows as agent_step_flows
from tccl.job import Job

from scale.fabric import FabricIndex


def step_flows(job: Job, trace: T.Trace) -> list[list[tuple[int, int, int]]]:
    """Per collective step, the (src rank, dst rank, QP index) flows that cross the
    network (pairs of one server left out when the job has NVLink)."""
    ranks = {r.rank: r for r in job.ranks}
    nvlink = job.transport.nvlink_gbps > 0
    out = []
    for step in trace.steps:
        if step.op is None:
            continue
        out.append([(a, b, i) for a, b in agent_step_flows(job, step)
                    if not (nvlink and ranks[a].server == ranks[b].server)
                    for i in range(job.transport.qps)])
    return out


# Collectives whose ranks form a ring that moves in lock step.
RING_OPS = ("allreduce", "allgather", "reducescatter")


def step_rings(job: Job, trace: T.Trace) -> list[np.ndarray | None]:
    """Per collective step, the number of each rank's ring (the step's groups; an array
    indexed by rank, -1 for a rank in none) for ring collectives, None for steps of
    independent connections (sendrecv, alltoall). An array, not a dict: at 100k ranks
    the flows' units are then one gather per step."""
    size = max(r.rank for r in job.ranks) + 1
    out: list[np.ndarray | None] = []
    for step in trace.steps:
        if step.op is None:
            continue
        if step.op in RING_OPS and step.group != "pp":
            groups = T.step_groups(step, job.ranks)
            ring = np.full(size, -1, dtype=np.int64)
            ring[[r.rank for g in groups for r in g]] = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
            out.append(ring)
        else:
            out.append(None)
    return out


@dataclass(frozen=True)
class StepFlows:
    """One step's flows as columns: ranks, NICs, QP index, UDP source port, and the
    unit of flows that move at one rate (a ring, else a connection's QPs:
    `controller.fairness`)."""

    src_rank: np.ndarray
    dst_rank: np.ndarray
    qp: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sport: np.ndarray
    unit: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class StepLayout:
    """What a job's steps are apart from their ports, per step: the flows as (src rank,
    dst rank, QP) rows, their units, and the ranks' NICs. Configurations with the same
    ring order share it (`scale.model.evaluate` makes it once per order: at 100k GPUs
    each costs ~0.5 s)."""

    flows: list[np.ndarray]
    units: list[np.ndarray]
    nic: np.ndarray


def step_layout(index: FabricIndex, job: Job, trace: T.Trace) -> StepLayout:
    """``job``'s `StepLayout` on ``index``'s fabric."""
    flows, units = [], []
    for pairs, rings in zip(step_flows(job, trace), step_rings(job, trace)):
        cols = np.array(pairs, dtype=np.int64).reshape(-1, 3)
        flows.append(cols)
        units.append((rings[cols[:, 0]] if rings is not None else cols[:, 0] * len(job.ranks) + cols[:, 1])
                     .reshape(-1))
    return StepLayout(flows, units, index.nics([r.ip for r in job.ranks]))


def job_step_flows(index: FabricIndex, job: Job, trace: T.Trace,
                   layout: StepLayout | None = None) -> list[StepFlows]:
    """`step_flows` of ``job`` as columns, with the ports the job's agents plan;
    ``layout``: the job's `step_layout`, if the caller has it."""
    # A trace's flows come from its steps' groups (`tccl.agent.workload_flows`), not
    # from the job's one ring: none is needed.
    port, planned = planned_ports(job, [], trace, plan=index.plan)
    layout = layout or step_layout(index, job, trace)
    nic = layout.nic
    out = []
    for cols, unit in zip(layout.flows, layout.units):
        # The plan's own port where it has the flow (one C-level map), else `port`'s.
        src, dst, qp = (c.tolist() for c in cols.T)
        found = list(map(planned.get, zip(src, dst) if job.transport.qps == 1 else zip(src, dst, qp)))
        sports = np.array([p if p is not None else port(a, b, i) for p, a, b, i in zip(found, src, dst, qp)],
                          dtype=np.int64)
        out.append(StepFlows(cols[:, 0], cols[:, 1], cols[:, 2], nic[cols[:, 0]], nic[cols[:, 1]], sports, unit))
    return out
