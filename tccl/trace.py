"""Trace-driven jobs: one training iteration as compute phases and collectives.

A trace (``traces/*.yaml``) describes what every rank does per iteration, the way a
data/tensor/pipeline/expert-parallel training job does it::

    name: moe-small
    iterations: 3
    ep: {size: 4, layout: rail}                            # expert-parallel groups
    steps:
      - {compute_ms: 30}                                    # forward + backward
      - {op: allreduce, group: tp, size: 262144}           # tensor parallel, in a server
      - {op: alltoall, group: ep, size: 65536, weights: [4, 1, 1, 1]}   # a hot expert
      - {op: sendrecv, group: pp, size: 65536}             # activations to the next stage
      - {op: allreduce, ranks: [[0, 5], [10, 15]], size: 4096}          # groups by hand
      - {op: allreduce, group: dp, size: 1048576}          # gradients, across servers

Groups are formed from the job's ranks: ``tp`` = the ranks of one server (they talk
over NVLink when the job has it), ``dp`` = the ranks of one rail across all servers
(the rail-local data-parallel rings), ``pp`` = pipeline stages are blocks, and each
rank sends to the rank at the same (server index, rail) in the next block, ``all`` =
every rank, ``ep`` = expert-parallel groups of ``ep.size`` ranks laid out by
``ep.layout`` (`ep_groups`: ``rail`` keeps a group on one rail, ``spread`` puts its
members on different rails), ``ranks`` = the groups a step lists by rank number.
All groups of a step run at the same time; the agents record each iteration's time.

Ops: ``allreduce``, ``allgather``, ``reducescatter``, ``alltoall`` (``weights``: the
share of each destination, by the group's rank order -- alltoallv's skew, every
sender the same), ``broadcast`` and ``reduce`` (the root is the group's lowest rank),
``sendrecv`` (group ``pp`` only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tccl.ranks import OPS, JobError, RankInfo, read_yaml

# The host link rate the shipped traces' sizes are stated for (400 Gbit/s scaled down
# 40000x): on a fabric with faster links a step moves proportionally more bytes, so it
# takes as long against the trace's compute as it was written to (`link_scale`).
TRACE_LINK_MBPS = 10.0
GROUPS = ("tp", "dp", "pp", "ep", "all")
EXPLICIT = "ranks"                 # the group label of a step that lists its ranks
EP_LAYOUTS = ("rail", "spread")
STEP_KEYS = ("compute_ms", "op", "group", "size", "ranks", "weights")


@dataclass(frozen=True)
class EpShape:
    """Expert-parallel groups: ``size`` ranks each, laid out by ``layout``."""

    size: int
    layout: str = "rail"


@dataclass(frozen=True)
class Step:
    """A compute phase (``compute_ms``) or a collective (``op`` in ``group``, ``size``).

    ``group`` is a named group, or `EXPLICIT` when ``ranks`` lists the groups; an
    ``ep`` step carries the trace's `EpShape`; ``weights`` skews an all-to-all."""

    compute_ms: float = 0.0
    op: str | None = None
    group: str = "all"
    size: int = 0
    ranks: tuple[tuple[int, ...], ...] = ()
    weights: tuple[float, ...] = ()
    ep: EpShape | None = None


@dataclass(frozen=True)
class Trace:
    name: str
    iterations: int
    steps: tuple[Step, ...]
    ep: EpShape | None = None


def _parse_ep(raw: Any, source: str) -> EpShape:
    if not isinstance(raw, Mapping) or set(raw) - {"size", "layout"}:
        raise JobError(f"{source}: ep: a mapping {{size, layout}}, got {raw!r}")
    size, layout = raw.get("size"), raw.get("layout", "rail")
    if not isinstance(size, int) or size < 2:
        raise JobError(f"{source}: ep.size: ranks per expert-parallel group, >= 2, got {size!r}")
    if layout not in EP_LAYOUTS:
        raise JobError(f"{source}: ep.layout: one of {', '.join(EP_LAYOUTS)}, got {layout!r}")
    return EpShape(size, layout)


def _parse_ranks(raw: Any, where: str) -> tuple[tuple[int, ...], ...]:
    """``[0, 4, 8]`` (one group) or ``[[0, 4], [1, 5]]`` (groups that run at once)."""
    groups = raw if isinstance(raw, list) and raw and all(isinstance(g, list) for g in raw) else [raw]
    seen: set[int] = set()
    out = []
    for g in groups:
        if not isinstance(g, list) or len(g) < 2 or not all(isinstance(r, int) and r >= 0 for r in g):
            raise JobError(f"{where}.ranks: a list of >= 2 rank numbers (or a list of such lists), got {raw!r}")
        if seen & set(g) or len(set(g)) != len(g):
            raise JobError(f"{where}.ranks: a rank appears twice in {raw!r}")
        seen |= set(g)
        out.append(tuple(g))
    return tuple(out)


def _parse_step(s: Any, where: str, ep: EpShape | None) -> Step:
    if not isinstance(s, Mapping):
        raise JobError(f"{where}: expected a mapping, got {s!r}")
    unknown = set(s) - set(STEP_KEYS)
    if unknown:
        raise JobError(f"{where}: unknown key(s) {sorted(unknown)} (known: {', '.join(STEP_KEYS)})")
    if "op" not in s:
        if "compute_ms" not in s or len(s) != 1:
            raise JobError(f"{where}: either compute_ms alone or op")
        ms = s["compute_ms"]
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or ms < 0:
            raise JobError(f"{where}.compute_ms: a duration >= 0, got {ms!r}")
        return Step(compute_ms=float(ms))
    op = s["op"]
    if op not in OPS:
        raise JobError(f"{where}.op: one of {', '.join(OPS)}, got {op!r}")
    if "compute_ms" in s:
        raise JobError(f"{where}: compute_ms and op: a step is one or the other")
    if not isinstance(s.get("size"), int) or isinstance(s.get("size"), bool) or s["size"] < 1:
        raise JobError(f"{where}.size: a positive byte count, got {s.get('size')!r}")
    ranks: tuple[tuple[int, ...], ...] = ()
    if "ranks" in s:
        if "group" in s:
            raise JobError(f"{where}: group and ranks: name a group or list its ranks, not both")
        ranks = _parse_ranks(s["ranks"], where)
        group = EXPLICIT
    else:
        group = s.get("group", "all")
        if group not in GROUPS:
            raise JobError(f"{where}.group: one of {', '.join(GROUPS)}, got {group!r}")
    if (op == "sendrecv") != (group == "pp"):
        raise JobError(f"{where}: sendrecv goes with group pp, and pp with sendrecv")
    if group == "ep" and ep is None:
        raise JobError(f"{where}.group: ep needs the trace's `ep: {{size, layout}}`")
    weights: tuple[float, ...] = ()
    if "weights" in s:
        w = s["weights"]
        if op != "alltoall":
            raise JobError(f"{where}.weights: only an alltoall is skewed, not {op}")
        if (not isinstance(w, list) or len(w) < 2 or sum(w) <= 0
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in w)):
            raise JobError(f"{where}.weights: a share >= 0 per destination of the group, got {w!r}")
        weights = tuple(float(x) for x in w)
    return Step(op=op, group=group, size=s["size"], ranks=ranks, weights=weights,
                ep=ep if group == "ep" else None)


def parse_trace(data: Any, source: str = "trace.yaml") -> Trace:
    """Validate a parsed trace document; errors name the file, the step and the key."""
    if not isinstance(data, Mapping):
        raise JobError(f"{source}: a trace is a mapping, found {type(data).__name__}")
    for key in data:
        if key not in ("name", "iterations", "steps", "ep"):
            raise JobError(f"{source}: {key}: unknown key (known: name, iterations, ep, steps)")
    iterations = data.get("iterations", 1)
    if not isinstance(iterations, int) or iterations < 1:
        raise JobError(f"{source}: iterations: a positive integer, got {iterations!r}")
    ep = _parse_ep(data["ep"], source) if "ep" in data else None
    raw = data.get("steps")
    if not isinstance(raw, list) or not raw:
        raise JobError(f"{source}: steps: a non-empty list is required")
    steps = tuple(_parse_step(s, f"{source}: steps[{k}]", ep) for k, s in enumerate(raw))
    return Trace(name=str(data.get("name", Path(source).stem)), iterations=iterations, steps=steps, ep=ep)


def link_scale(host_mbps: float) -> float:
    """Bytes on links of ``host_mbps`` per byte of a trace stated at TRACE_LINK_MBPS."""
    return host_mbps / TRACE_LINK_MBPS


def load_trace(path: str | Path) -> Trace:
    return parse_trace(read_yaml(path, "the trace"), str(path))


def trace_document(trace: Trace) -> dict[str, Any]:
    """``trace`` as the YAML document `parse_trace` reads back (what the importers and
    the experiments write)."""
    steps: list[dict[str, Any]] = []
    for s in trace.steps:
        if s.op is None:
            steps.append({"compute_ms": s.compute_ms})
            continue
        step: dict[str, Any] = {"op": s.op}
        if s.group == EXPLICIT:
            step["ranks"] = [list(g) for g in s.ranks]
        else:
            step["group"] = s.group
        step["size"] = s.size
        if s.weights:
            step["weights"] = list(s.weights)
        steps.append(step)
    doc: dict[str, Any] = {"name": trace.name, "iterations": trace.iterations}
    if trace.ep is not None:
        doc["ep"] = {"size": trace.ep.size, "layout": trace.ep.layout}
    doc["steps"] = steps
    return doc


def servers_of(ranks: Sequence[RankInfo]) -> list[list[RankInfo]]:
    """The job's servers in job order (first appearance), each its ranks in job order."""
    out: dict[str, list[RankInfo]] = {}
    for r in ranks:
        out.setdefault(r.server, []).append(r)
    return list(out.values())


def ep_groups(shape: EpShape, ranks: Sequence[RankInfo]) -> list[list[RankInfo]]:
    """Expert-parallel groups of ``shape.size`` ranks; ``size`` must divide the number
    of servers and every server must have the same rails.

    ``rail``: each rail's ranks, servers in job order, cut into consecutive groups --
    a group's traffic stays on its rail (one leaf per block), as Megatron carves EP
    groups out of the data-parallel (rail) groups. ``spread``: the servers cut into
    consecutive runs of ``size``; in a run, group g takes the i-th server's rank on
    rail (g + i) mod rails -- the same servers as ``rail``, but every member on a
    different rail, so every exchange between servers crosses a spine (or needs PXN).
    """
    servers = servers_of(ranks)
    rails = sorted({r.rail for r in servers[0]})
    if any(sorted(r.rail for r in srv) != rails for srv in servers):
        raise JobError("ep groups need the same rails on every server")
    if shape.size > len(servers) or len(servers) % shape.size:
        raise JobError(f"ep.size: {shape.size} must divide the job's {len(servers)} servers")
    at = {(k, r.rail): r for k, srv in enumerate(servers) for r in srv}
    out = []
    for start in range(0, len(servers), shape.size):
        run = range(start, start + shape.size)
        for g, rail in enumerate(rails):
            if shape.layout == "rail":
                out.append([at[(k, rail)] for k in run])
            else:
                out.append([at[(k, rails[(g + i) % len(rails)])] for i, k in enumerate(run)])
    return out


def groups(kind: str, ranks: Sequence[RankInfo]) -> list[list[RankInfo]]:
    """The rank groups of a plain ``kind`` (tp, dp, all), each in job order."""
    if kind == "all":
        return [list(ranks)]
    if kind not in ("tp", "dp"):
        raise ValueError(f"no plain groups for {kind!r}")
    out: dict[Any, list[RankInfo]] = {}
    for r in ranks:
        out.setdefault(r.server if kind == "tp" else r.rail, []).append(r)
    return list(out.values())


def step_groups(step: Step, ranks: Sequence[RankInfo]) -> list[list[RankInfo]]:
    """The groups one collective step runs at once (not ``pp``: `pp_pairs`)."""
    if step.group == EXPLICIT:
        by_rank = {r.rank: r for r in ranks}
        return [[by_rank[k] for k in g] for g in step.ranks]
    if step.group == "ep":
        assert step.ep is not None
        return ep_groups(step.ep, ranks)
    return groups(step.group, ranks)


def check_trace(trace: Trace, ranks: Sequence[RankInfo], source: str) -> None:
    """Whether ``trace`` fits a job of ``ranks``: explicit ranks exist, the ep shape
    fits the servers, weights have one share per destination. Errors name the step."""
    for k, step in enumerate(trace.steps):
        if step.op is None or step.group == "pp":
            continue
        where = f"{source}: steps[{k}]"
        if step.group == EXPLICIT:
            bad = sorted({r for g in step.ranks for r in g if r >= len(ranks)})
            if bad:
                raise JobError(f"{where}.ranks: rank(s) {bad} not in the job (ranks 0..{len(ranks) - 1})")
        try:
            found = step_groups(step, ranks)
        except JobError as e:
            raise JobError(f"{where}.group: {e}") from e
        if step.weights and any(len(g) != len(step.weights) for g in found):
            raise JobError(f"{where}.weights: {len(step.weights)} shares for groups of "
                           f"{sorted({len(g) for g in found})} ranks: one per destination")


def pp_pairs(ranks: tuple[RankInfo, ...]) -> list[tuple[int, int]]:
    """Pipeline sends: (block b, server index, rail) -> same place in block b+1."""
    index: dict[str, int] = {}
    for r in ranks:
        if r.server not in index:
            index[r.server] = sum(1 for s in index if _block_of(ranks, s) == r.block)
    where = {(r.block, index[r.server], r.rail): r.rank for r in ranks}
    return [(rank, where[(b + 1, s, rail)]) for (b, s, rail), rank in where.items()
            if (b + 1, s, rail) in where]


def _block_of(ranks: tuple[RankInfo, ...], server: str) -> int:
    return next(r.block for r in ranks if r.server == server)
