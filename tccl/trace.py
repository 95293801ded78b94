"""Trace-driven jobs: one training iteration as compute phases and collectives.

A trace (``traces/*.yaml``) describes what every rank does per iteration, the way a
data/tensor/pipeline-parallel training job does it::

    name: dp-tp-small
    iterations: 3
    steps:
      - {compute_ms: 30}                                    # forward + backward
      - {op: allreduce, group: tp, size: 262144}           # tensor parallel, in a server
      - {op: sendrecv, group: pp, size: 65536}             # activations to the next stage
      - {op: allreduce, group: dp, size: 1048576}          # gradients, across servers

Groups are formed from the job's ranks: ``tp`` = the ranks of one server (they talk
over NVLink when the job has it), ``dp`` = the ranks of one rail across all servers
(the rail-local data-parallel rings), ``pp`` = pipeline stages are blocks, and each
rank sends to the rank at the same (server index, rail) in the next block, ``all`` =
every rank. All groups of a step run at the same time; the agents record each
iteration's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tccl.ranks import OPS, JobError, RankInfo, read_yaml

GROUPS = ("tp", "dp", "pp", "all")


@dataclass(frozen=True)
class Step:
    """A compute phase (``compute_ms``) or a collective (``op`` in ``group``, ``size``)."""

    compute_ms: float = 0.0
    op: str | None = None
    group: str = "all"
    size: int = 0


@dataclass(frozen=True)
class Trace:
    name: str
    iterations: int
    steps: tuple[Step, ...]


def parse_trace(data: Any, source: str = "trace.yaml") -> Trace:
    """Validate a parsed trace document; errors name the file and the step."""
    if not isinstance(data, Mapping):
        raise JobError(f"{source}: a trace is a mapping, found {type(data).__name__}")
    for key in data:
        if key not in ("name", "iterations", "steps"):
            raise JobError(f"{source}: {key}: unknown key (known: name, iterations, steps)")
    iterations = data.get("iterations", 1)
    if not isinstance(iterations, int) or iterations < 1:
        raise JobError(f"{source}: iterations: a positive integer, got {iterations!r}")
    raw = data.get("steps")
    if not isinstance(raw, list) or not raw:
        raise JobError(f"{source}: steps: a non-empty list is required")
    steps = []
    for k, s in enumerate(raw):
        where = f"{source}: steps[{k}]"
        if not isinstance(s, Mapping):
            raise JobError(f"{where}: expected a mapping, got {s!r}")
        unknown = set(s) - {"compute_ms", "op", "group", "size"}
        if unknown:
            raise JobError(f"{where}: unknown key(s) {sorted(unknown)}")
        if "op" in s:
            if s["op"] not in OPS:
                raise JobError(f"{where}.op: one of {', '.join(OPS)}, got {s['op']!r}")
            if s.get("group", "all") not in GROUPS:
                raise JobError(f"{where}.group: one of {', '.join(GROUPS)}, got {s.get('group')!r}")
            if not isinstance(s.get("size"), int) or s["size"] < 1:
                raise JobError(f"{where}.size: a positive byte count, got {s.get('size')!r}")
            if (s["op"] == "sendrecv") != (s.get("group") == "pp"):
                raise JobError(f"{where}: sendrecv goes with group pp, and pp with sendrecv")
            steps.append(Step(op=s["op"], group=s.get("group", "all"), size=s["size"]))
        elif "compute_ms" in s:
            ms = s["compute_ms"]
            if not isinstance(ms, (int, float)) or ms < 0:
                raise JobError(f"{where}.compute_ms: a duration >= 0, got {ms!r}")
            steps.append(Step(compute_ms=float(ms)))
        else:
            raise JobError(f"{where}: either compute_ms or op")
    return Trace(name=str(data.get("name", Path(source).stem)), iterations=iterations, steps=tuple(steps))


def load_trace(path: str | Path) -> Trace:
    return parse_trace(read_yaml(path, "the trace"), str(path))


def groups(kind: str, ranks: tuple[RankInfo, ...]) -> list[list[RankInfo]]:
    """The rank groups of ``kind`` (see the module doc), each in job order."""
    if kind == "all":
        return [list(ranks)]
    if kind not in ("tp", "dp"):
        raise ValueError(f"no plain groups for {kind!r}")
    out: dict[Any, list[RankInfo]] = {}
    for r in ranks:
        out.setdefault(r.server if kind == "tp" else r.rail, []).append(r)
    return list(out.values())


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
