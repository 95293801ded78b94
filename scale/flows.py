"""The flows of a job's collective steps, with the source ports its agents would use.

A configuration's job is the demo's (`experiments.configs.build_job`: the same ranks,
ring orders, QPs and port mode), its ports are the agents' own plan
(`tccl.agent.port_function`: random, or hash-orthogonal through `tccl.ports`), and the
flows of a step are the pairs its groups' rings (or pipeline sends) connect
(`tccl.trace`, `tccl.collectives`), one flow per QP, NVLink pairs left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tccl import trace as T
from tccl.agent import port_function, step_flows as agent_step_flows
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


def step_rings(job: Job, trace: T.Trace) -> list[dict[int, int] | None]:
    """Per collective step, rank -> number of its ring (the step's groups) for ring
    collectives, None for steps of independent connections (sendrecv, alltoall)."""
    out: list[dict[int, int] | None] = []
    for step in trace.steps:
        if step.op is None:
            continue
        if step.op in RING_OPS and step.group != "pp":
            out.append({r.rank: k for k, g in enumerate(T.step_groups(step, job.ranks)) for r in g})
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


def job_step_flows(index: FabricIndex, job: Job, trace: T.Trace) -> list[StepFlows]:
    """`step_flows` of ``job`` as columns, with the ports the job's agents plan."""
    # A trace's flows come from its steps' groups (`tccl.agent.workload_flows`), not
    # from the job's one ring: none is needed.
    port, _ = port_function(job, [], trace, plan=index.plan)
    nic = index.nics([r.ip for r in job.ranks])
    out = []
    for flows, rings in zip(step_flows(job, trace), step_rings(job, trace)):
        cols = np.array(flows, dtype=np.int64).reshape(-1, 3)
        sports = np.array([port(a, b, i) for a, b, i in flows], dtype=np.int64)
        unit = np.array([rings[a] for a, _, _ in flows], dtype=np.int64) if rings is not None else \
            cols[:, 0] * len(job.ranks) + cols[:, 1]
        out.append(StepFlows(cols[:, 0], cols[:, 1], cols[:, 2], nic[cols[:, 0]], nic[cols[:, 1]], sports,
                             unit.reshape(-1)))
    return out
