"""What every importer shares: the fabric's shape, the parallel groups a framework
forms on it, size scaling and the summary of what was imported.

Groups follow Megatron-LM's rank layout on the job's rank order (server by server,
rails inside a server): tensor parallel = consecutive ranks, pipeline stages =
consecutive blocks of ranks, data parallel = the ranks of a stage with the same TP
index, expert parallel = consecutive runs of a data-parallel group, and ``dp_ep``
(the data-parallel group of one expert) = a data-parallel group strided by the EP
size. A group that equals one of the trace's named groups is written by name (``tp``,
``dp``, ``all``, ``ep`` with ``layout: rail``), any other as explicit ``ranks``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tccl.dcqcn import Scale
from tccl.job import Workload, job_from_fabric
from tccl.ranks import JobError, RankInfo
from tccl.trace import EXPLICIT, EpShape, Step, Trace, servers_of, step_groups
from tccl.traffic import step_label
from topo.spec import SpecError, load_spec


class ImportRefused(JobError):
    """A foreign file the testbed cannot run as it stands; says file:line and what."""


@dataclass(frozen=True)
class Shape:
    """The fabric a workload is imported for: its ranks, in job order."""

    ranks: tuple[RankInfo, ...]
    blocks: int

    @property
    def gpus(self) -> int:
        return len(self.ranks)

    @property
    def per_server(self) -> int:
        return len(servers_of(self.ranks)[0])


def fabric_shape(spec_path: str | Path) -> Shape:
    """The ranks a job on the fabric ``spec_path`` has (`tccl.job.job_from_fabric`)."""
    try:
        job = job_from_fabric(spec_path, Workload(), emulated=False)
        return Shape(job.ranks, load_spec(spec_path, emulated=False).blocks)
    except SpecError as e:
        raise JobError(str(e)) from e


def default_size_scale(spec_path: str | Path) -> float:
    """Bytes here per real byte: the fabric's rate factor (host link / 400 Gbit/s),
    so a message takes as long on the emulated links as on real ones."""
    spec = load_spec(spec_path, emulated=False)
    return Scale.for_line_rate(spec.links.host_mbps * 1e6).rate_factor


def scaled(size: int, scale: float) -> int:
    """A message size on the testbed: ``size x scale``, at least one byte."""
    return max(1, round(size * scale))


@dataclass(frozen=True)
class Parallelism:
    """A job's GPUs and degrees of parallelism (tensor, pipeline, expert)."""

    gpus: int
    tp: int
    pp: int = 1
    ep: int = 1

    def check(self, shape: Shape, where: str) -> None:
        """Refuse (at ``where``) what the fabric cannot hold or the groups cannot map."""
        if self.gpus != shape.gpus:
            raise ImportRefused(f"{where}: the workload has {self.gpus} GPUs, the fabric {shape.gpus} "
                                f"(one per NIC): import it for a fabric spec with {self.gpus} NICs")
        if min(self.tp, self.pp, self.ep) < 1:
            raise ImportRefused(f"{where}: TP {self.tp}, PP {self.pp}, EP {self.ep}: each must be >= 1")
        if self.tp not in (1, shape.per_server):
            raise ImportRefused(f"{where}: TP size {self.tp}: TP runs inside a server over NVLink, "
                                f"so it must be the fabric's {shape.per_server} ranks per server (or 1)")
        if self.pp not in (1, shape.blocks):
            raise ImportRefused(f"{where}: PP size {self.pp}: pipeline stages are the fabric's "
                                f"{shape.blocks} blocks (or 1)")
        if shape.gpus % (self.tp * self.pp):
            raise ImportRefused(f"{where}: TP {self.tp} x PP {self.pp} does not divide {shape.gpus} GPUs")
        if self.dp % self.ep:
            raise ImportRefused(f"{where}: EP size {self.ep} does not divide the data-parallel size {self.dp}")

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    def groups(self, kind: str) -> list[list[int]]:
        """Megatron's groups of ``kind`` (tp, dp, ep, dp_ep, all) as rank numbers."""
        n, stage = self.gpus, self.gpus // self.pp
        if kind == "all":
            return [list(range(n))]
        if kind == "tp":
            return [list(range(a, a + self.tp)) for a in range(0, n, self.tp)]
        dp = [[base + t + k * self.tp for k in range(self.dp)]
              for base in range(0, n, stage) for t in range(self.tp)]
        if kind == "dp":
            return dp
        if kind == "ep":
            return [g[a:a + self.ep] for g in dp for a in range(0, len(g), self.ep)]
        if kind == "dp_ep":
            return [g[i::self.ep] for g in dp for i in range(self.ep)]
        raise ValueError(f"no group kind {kind!r}")


def collective(op: str, kind: str, size: int, par: Parallelism, shape: Shape) -> Step:
    """A collective step of ``op`` over Megatron's ``kind`` groups: by the trace's name
    for them (or ``all``) when that names the same ranks (module doc), else explicit."""
    wanted = sorted(sorted(g) for g in par.groups(kind))
    if len(wanted[0]) < 2:
        raise ValueError(f"{kind} groups of one rank carry nothing")
    named: list[Step] = [Step(op=op, group="all", size=size)]
    if kind in ("tp", "dp"):
        named.append(Step(op=op, group=kind, size=size))
    if kind == "ep" and len(servers_of(shape.ranks)) % par.ep == 0:
        named.append(Step(op=op, group="ep", size=size, ep=EpShape(par.ep, "rail")))
    for probe in named:
        if sorted(sorted(r.rank for r in g) for g in step_groups(probe, shape.ranks)) == wanted:
            return probe
    return Step(op=op, group=EXPLICIT, size=size, ranks=tuple(tuple(g) for g in wanted))


def merge_compute(steps: Sequence[Step]) -> list[Step]:
    """Consecutive compute phases as one; zero-length ones dropped."""
    out: list[Step] = []
    for s in steps:
        if s.op is None:
            if s.compute_ms <= 0:
                continue
            if out and out[-1].op is None:
                out[-1] = Step(compute_ms=out[-1].compute_ms + s.compute_ms)
                continue
        out.append(s)
    return out


@dataclass
class Counts:
    """Per (op, group) label: the steps made and the bytes the source gave them."""

    steps: Counter = field(default_factory=Counter)
    source_bytes: Counter = field(default_factory=Counter)

    def add(self, step: Step, source_size: int) -> Step:
        """Count ``step``, made from ``source_size`` bytes of the source."""
        label = step_label(step.op or "", step.group)
        self.steps[label] += 1
        self.source_bytes[label] += source_size
        return step


@dataclass
class Imported:
    """An imported trace and what it came from (`Counts`, notes on what was read how)."""

    trace: Trace
    source: str
    fmt: str
    scale: float
    counts: Counts
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> Counter:
        return self.counts.steps

    @property
    def source_bytes(self) -> Counter:
        return self.counts.source_bytes

    def imported_bytes(self) -> Counter:
        out: Counter = Counter()
        for s in self.trace.steps:
            if s.op is not None:
                out[step_label(s.op, s.group)] += s.size
        return out

    def summary(self) -> str:
        """What was imported: steps and bytes per (op, group), per iteration."""
        compute = sum(s.compute_ms for s in self.trace.steps if s.op is None)
        got = self.imported_bytes()
        lines = [f"imported {self.fmt} {self.source}: {len(self.trace.steps)} steps per iteration "
                 f"({sum(self.steps.values())} collectives, {compute:.3f} ms compute), sizes x {self.scale:.3g}"]
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(f"  {'op/group':24s} {'steps':>5s} {'source bytes':>15s} {'bytes here':>12s}")
        for label in sorted(self.steps):
            lines.append(f"  {label:24s} {self.steps[label]:5d} {self.source_bytes[label]:15d} {got[label]:12d}")
        return "\n".join(lines)


def ep_shape(steps: Sequence[Step]) -> EpShape | None:
    """The trace's ep shape: the one its ep steps carry (a trace has one)."""
    shapes = {s.ep for s in steps if s.ep is not None}
    if len(shapes) > 1:
        raise ImportRefused(f"expert-parallel groups of several shapes {sorted(map(str, shapes))}: "
                            f"a trace has one ep shape")
    return next(iter(shapes), None)
