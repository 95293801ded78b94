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

from tccl import collectives as C
from tccl import trace as T
from tccl.agent import port_function
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


@dataclass(frozen=True)
class StepFlows:
    """One step's flows as columns: ranks, NICs, QP index and UDP source port."""

    src_rank: np.ndarray
    dst_rank: np.ndarray
    qp: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sport: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


def job_step_flows(index: FabricIndex, job: Job, trace: T.Trace) -> list[StepFlows]:
    """`step_flows` of ``job`` as columns, with the ports the job's agents plan."""
    ring = C.ring_order(job.ranks, job.workload.order)
    port, _ = port_function(job, ring, trace)
    nic = index.nics([r.ip for r in job.ranks])
    out = []
    for flows in step_flows(job, trace):
        cols = np.array(flows, dtype=np.int64).reshape(-1, 3)
        sports = np.array([port(a, b, i) for a, b, i in flows], dtype=np.int64)
        out.append(StepFlows(cols[:, 0], cols[:, 1], cols[:, 2], nic[cols[:, 0]], nic[cols[:, 1]], sports))
    return out
