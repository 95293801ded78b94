"""Where a job's bytes went: per (op, group) of its trace and per channel.

A TP AllReduce that never left its server and a DP AllReduce that crossed the spines
look alike in an iteration time; the bytes per channel tell them apart. Every message
a collective program sends is counted by `tccl.collectives.run_collective` as
(src, dst, channel) -> bytes; `Traffic.add` files them under the step's (op, group)
and under the channel they took:

* ``nvlink``: the in-server channel;
* ``leaf``: the network, both NICs on one leaf (same block and rail: rail-local);
* ``spine``: the network through a spine (another rail, or another block of the pod);
* ``superspine``: the network between pods (three-tier fabrics).

Bytes are message payload, counted once at the sender (a PXN relay's forwarded
message counts again on its second hop, as it crosses a second channel); resends and
headers are the links' business (the run's link numbers).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from tccl.engine import NVLINK
from tccl.ranks import RankInfo
from tccl.trace import Step, pp_pairs, step_groups

CHANNELS = ("nvlink", "leaf", "spine", "superspine")

Sent = Mapping[tuple[int, int, str], int]     # (src, dst, channel) -> bytes


def channel(a: RankInfo, b: RankInfo, via: str, blocks_per_pod: int | None = None) -> str:
    """The channel a message from ``a`` to ``b`` over ``via`` takes (module doc);
    ``blocks_per_pod`` None: one pod."""
    if via == NVLINK:
        return "nvlink"
    if (a.block, a.rail) == (b.block, b.rail):
        return "leaf"
    if blocks_per_pod and a.block // blocks_per_pod != b.block // blocks_per_pod:
        return "superspine"
    return "spine"


def step_label(op: str, group: str) -> str:
    """The key of a step's bytes: ``op/group`` (e.g. ``alltoall/ep``)."""
    return f"{op}/{group}"


class Traffic:
    """Bytes by (op, group) and by channel, summed over the steps `add` is given."""

    def __init__(self, ranks: Iterable[RankInfo], blocks_per_pod: int | None = None) -> None:
        self.ranks = {r.rank: r for r in ranks}
        self.blocks_per_pod = blocks_per_pod
        self.by_step: Counter[str] = Counter()
        self.by_channel: Counter[str] = Counter({c: 0 for c in CHANNELS})
        self.by_step_channel: Counter[tuple[str, str]] = Counter()

    def add(self, op: str, group: str, sent: Sent) -> None:
        label = step_label(op, group)
        for (src, dst, via), nbytes in sent.items():
            ch = channel(self.ranks[src], self.ranks[dst], via, self.blocks_per_pod)
            self.by_step[label] += nbytes
            self.by_channel[ch] += nbytes
            self.by_step_channel[(label, ch)] += nbytes

    def to_json(self) -> dict[str, Any]:
        steps: dict[str, dict[str, int]] = {}
        for (label, ch), nbytes in sorted(self.by_step_channel.items()):
            steps.setdefault(label, {})[ch] = nbytes
        return {"bytes_by_step": dict(sorted(self.by_step.items())),
                "bytes_by_channel": {c: self.by_channel[c] for c in CHANNELS},
                "bytes_by_step_channel": steps}


def merged(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of several `Traffic.to_json` (every agent's: the job's)."""
    by_step: Counter[str] = Counter()
    by_channel: Counter[str] = Counter({c: 0 for c in CHANNELS})
    cross: dict[str, Counter[str]] = {}
    for p in parts:
        by_step.update(p.get("bytes_by_step", {}))
        by_channel.update(p.get("bytes_by_channel", {}))
        for label, chans in p.get("bytes_by_step_channel", {}).items():
            cross.setdefault(label, Counter()).update(chans)
    return {"bytes_by_step": dict(sorted(by_step.items())),
            "bytes_by_channel": {c: by_channel[c] for c in CHANNELS},
            "bytes_by_step_channel": {k: dict(sorted(v.items())) for k, v in sorted(cross.items())}}


def expected_bytes(steps: Iterable[Step], ranks: Sequence[RankInfo], iterations: int = 1) -> dict[str, int]:
    """The bytes a trace's steps (`tccl.trace.Step`) send per (op, group) over
    ``iterations``, as `Traffic` counts them without PXN: a ring AllReduce of n ranks
    sends 2(n-1) x size, AllGather, ReduceScatter, AllToAll (however skewed: each rank
    keeps its own share), Broadcast and Reduce (n-1) x size, each pipeline pair size."""
    out: Counter[str] = Counter()
    for s in steps:
        if s.op is None:
            continue
        if s.group == "pp":
            nbytes = len(pp_pairs(tuple(ranks))) * s.size
        else:
            factor = 2 if s.op == "allreduce" else 1
            nbytes = sum(factor * (len(g) - 1) * s.size for g in step_groups(s, ranks))
        out[step_label(s.op, s.group)] += nbytes * iterations
    return dict(sorted(out.items()))


def traffic_line(traffic: Mapping[str, Any]) -> str:
    """One line for a run's log: bytes per channel, then per (op, group)."""
    chans = ", ".join(f"{c} {traffic['bytes_by_channel'][c]}" for c in CHANNELS)
    steps = ", ".join(f"{k} {v}" for k, v in traffic["bytes_by_step"].items())
    return f"bytes by channel: {chans}; by step: {steps or '-'}"
