"""How a collective step's bytes fall on a connection's QPs.

The agents post every message of a connection whole on one of its QPs, round robin
over them for the job's life (`tccl.engine.Engine.send`; NCCL's
``NCCL_IB_SPLIT_DATA_ON_QPS=0``). A step of one message per connection -- a pipeline
send, an all-to-all's chunk -- therefore moves on *one* QP at the NIC's full rate,
QP ``(messages before it) mod q``, which changes from iteration to iteration, while a
ring's slices alternate over all of them. Two of a leaf's pipeline sends on QPs of one
index share an uplink whenever their ports put those QPs on one spine, although the
connections' QPs, counted together, are spread evenly.
"""

from __future__ import annotations

import numpy as np

from experiments.metrics import StepCost
from scale.flows import StepFlows
from tccl import collectives as C

# Collectives whose ranks pass their data round a ring (`tccl.collectives._ring`):
# its steps for n ranks.
RING_STEPS = {"allreduce": lambda n: 2 * (n - 1), "reducescatter": lambda n: n - 1,
              "allgather": lambda n: n - 1}


def slice_count(nbytes: int) -> int:
    """Messages `tccl.collectives.slices` cuts ``nbytes`` into."""
    return max(1, min(C.MAX_SLICES, -(-nbytes // C.SLICE_BYTES)))


def step_messages(op: str, ranks: int, size: int) -> int:
    """The most messages a connection of a step carries (nccl-tests' ``size``,
    ``ranks`` per group), which sets a ring's pace: one per pipeline send and per
    all-to-all peer; a chain's slices; a ring's slices of the parts it passes on --
    every part but the next one (n-1 steps), every part twice but the next two (an
    AllReduce's 2(n-1)). Parts differ by at most a byte, so their slice counts differ
    only where a part size crosses a multiple of `tccl.collectives.SLICE_BYTES`."""
    if ranks < 2:
        return 0
    if op in ("sendrecv", "alltoall"):
        return 1
    if op in ("broadcast", "reduce"):
        return slice_count(size)
    if op not in RING_STEPS:
        raise ValueError(f"unknown collective {op!r}")
    base, extra = divmod(size, ranks)                      # `tccl.collectives.chunks`
    parts = base + (np.arange(ranks) < extra)
    counts = np.clip(-(-parts // C.SLICE_BYTES), 1, C.MAX_SLICES)
    if RING_STEPS[op](ranks) == ranks - 1:
        return int(counts.sum() - counts.min())
    return int(2 * counts.sum() - (counts + np.roll(counts, -1)).min())


def qp_messages(messages: int, before: np.ndarray, qp: np.ndarray, qps: int) -> np.ndarray:
    """Per flow (QP ``qp`` of a connection that sent ``before`` messages earlier in the
    job), how many of the step's ``messages`` it carries: message i goes on QP
    (before + i) mod ``qps``."""
    first = (np.asarray(qp) - np.asarray(before)) % qps       # the first message index on this QP
    return np.where(first < messages, (messages - 1 - first) // qps + 1, 0)


def waiting_slice(op: str, ranks: int, size: int) -> float:
    """Bytes of the slice a rank of the step waits for before its NIC can go on: a
    chain's ranks forward the slices they receive and have nothing else to send; a
    ring's ranks send their own part first, so only a part of one slice leaves them
    idle until its first slice is in (with two or more, the first one received is in
    before the rest of their own has left); a pipeline send or an all-to-all forwards
    nothing."""
    if ranks < 2 or op in ("sendrecv", "alltoall"):
        return 0.0
    part = size if op in ("broadcast", "reduce") else -(-size // ranks)
    count = slice_count(part)
    return part / count if op in ("broadcast", "reduce") or count == 1 else 0.0


def messages_before(steps_flows: list[StepFlows], costs: list[StepCost], ranks: int, qps: int
                    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per step of a job (its flows, ``ranks`` ranks, ``qps`` QPs per connection), for
    each of its flows: the messages its connection carried in the iteration's earlier
    steps, and in a whole iteration (a connection may serve several steps: a pipeline
    pair that is also a ring hop). In iteration k a flow's connection has sent
    ``before + k x per iteration`` before the step."""
    if all(step_messages(c.op, c.ranks, c.size) % qps == 0 for c in costs):
        # Every step starts each connection at QP 0 (at 100k GPUs: no sort of 200k pairs).
        zeros = [np.zeros(len(fl), dtype=np.int64) for fl in steps_flows]
        return zeros, zeros
    pairs = [fl.src_rank * ranks + fl.dst_rank for fl in steps_flows]
    every = np.unique(np.concatenate(pairs)) if pairs else np.zeros(0, dtype=np.int64)
    sent = np.zeros(len(every), dtype=np.int64)
    at = [np.searchsorted(every, p) for p in pairs]
    before = []
    for where, cost in zip(at, costs):
        before.append(sent[where])
        sent[np.unique(where)] += step_messages(cost.op, cost.ranks, cost.size)
    return before, [sent[where] for where in at]
