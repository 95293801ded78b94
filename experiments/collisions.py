"""What the flow-level model (`scale.model`, the one model) predicts for a demo job:
the `model` and `collisions` columns of the table.

For every collective step of the trace, the flows that cross the network (NVLink pairs
excluded; one flow per QP that carries a message of the step, as the agents' round
robin puts them: `scale.messages`) get the source ports the agents will use and the
path `topo.hashmodel` predicts for them (bit-exact with the switches); `scale.model`
gives their max-min fair rates, the step's time on a perfect emulation of the links
(frame headers, pipeline fill) and the collisions: flows on a leaf-spine link beyond
what it carries at full pace, in the iteration with the most. With GOR on, the model's busbw is
GOR's steady state (`scale.gor`: its placement run on the step's flows), while
``collisions`` stay the library's own -- what GOR finds when the job starts.

`expected_random` repeats the count over many seeds of random ports (the stock
library's draw), the average a stock job meets.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from scale.fabric import FabricIndex
from scale.model import evaluate_job
from tccl.job import Job
from tccl.trace import Trace
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, predict_path


def link_loads(plan: AddressPlan, job: Job, flows: list[tuple[int, int, int]], port: Any) -> Counter:
    """QP flows per directed link (``(a, b)`` node names) of the predicted paths;
    ``port(src, dst, index)`` is the agents' port plan."""
    ranks = {r.rank: r for r in job.ranks}
    loads: Counter = Counter()
    for a, b, i in flows:
        path = predict_path(plan, FiveTuple(ranks[a].ip, ranks[b].ip, sport=port(a, b, i)))
        loads.update(zip(path, path[1:]))
    return loads


def analyse(plan: AddressPlan, job: Job, trace: Trace, gor: bool = False) -> dict[str, Any]:
    """``collisions`` (summed over the steps of the iteration with the most) and the
    most QP flows on one leaf-spine link for the job's own ports, and the model's busbw
    fraction (under GOR when ``gor``)."""
    index = FabricIndex(plan)
    own = evaluate_job(index, job, trace)
    paced = evaluate_job(index, job, trace, gor=True) if gor else own
    return {"collisions": own.collisions, "max_flows_per_link": own.max_flows_per_link,
            "model_busbw_frac": paced.busbw_frac, "model_gor_moves": paced.moves}


def random_draws_key(job: Job) -> Job:
    """What `expected_random` depends on of ``job``: all of it but its name and its
    port policy and seed, which the draws replace (one key, one mean)."""
    return dataclasses.replace(job, name="", transport=dataclasses.replace(job.transport, ports="random", seed=0))


def expected_random(plan: AddressPlan, job: Job, trace: Trace, seeds: int = 100) -> float:
    """Mean `collisions` of the job over ``seeds`` draws of random source ports."""
    index = FabricIndex(plan)
    total = 0
    for s in range(seeds):
        t = dataclasses.replace(job.transport, ports="random", seed=10_000 + s)
        total += evaluate_job(index, dataclasses.replace(job, transport=t), trace).collisions
    return total / seeds
