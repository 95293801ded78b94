"""SimAI / AICB text workloads: the file SimAI's ``Workload.cc`` reads and AICB writes.

Line 1: the parallelism policy (``HYBRID_TRANSFORMER_FWD_IN_BCKWD``,
``HYBRID_TRANSFORMER`` or ``DATA``) and ``key: value`` pairs (``model_parallel_NPU_group``
= TP, ``ep``, ``pp``, ``vpp``, ``ga``, ``all_gpus``, ``checkpoints``,
``checkpoint_initiates``, ``pp_comm``); line 2: the number of layers; then one line per
layer of 12 columns::

    name  dependency  fwd_compute fwd_comm fwd_size  ig_compute ig_comm ig_size
                      wg_compute wg_comm wg_size  wg_update

Compute times are SimAI ticks: nanoseconds. A comm type is ``NONE`` or a collective
(``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``, ``ALLTOALL``, ``BROADCAST``) with an
optional group suffix: ``_EP`` (expert parallel), ``_DP_EP`` (the data-parallel group
of one expert); a bare one means TP in the forward and input-gradient columns and DP in
the weight-gradient column (everything is DP under ``DATA``).

One iteration, as SimAI's FWD_IN_BCKWD runs it (dependencies serialised): every
layer's forward compute then its forward collective; with PP, ``pp_comm`` bytes to
the next stage; then the layers in reverse, each its input-gradient compute and
collective, then its weight-gradient compute and collective; with PP, ``pp_comm``
bytes again (the testbed's pipeline sends one way, stage b to b+1); then the layers'
weight updates as one compute phase. ``vpp``, ``ga`` and checkpoints do not change
the traffic of one pass and are not modelled (the summary says so when they are set).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tccl.importers.common import (Counts, Imported, ImportRefused, Parallelism, Shape, collective, ep_shape,
                                   merge_compute, scaled)
from tccl.trace import Step, Trace

FORMAT = "simai"
POLICIES = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER", "DATA")
OPS = {"ALLREDUCE": "allreduce", "ALLGATHER": "allgather", "REDUCESCATTER": "reducescatter",
       "ALLTOALL": "alltoall", "BROADCAST": "broadcast"}
SUFFIXES = {"_DP_EP": "dp_ep", "_EP": "ep", "": None}      # longest first
COLUMNS = ("name", "dependency", "fwd_compute", "fwd_comm", "fwd_size", "ig_compute", "ig_comm",
           "ig_size", "wg_compute", "wg_comm", "wg_size", "wg_update")
NS_PER_MS = 1e6


@dataclass(frozen=True)
class Phase:
    """One of a layer's three phases: compute (ns), then a collective (or ``NONE``)."""

    compute_ns: int
    comm: str = "NONE"
    size: int = 0


@dataclass(frozen=True)
class Layer:
    name: str
    fwd: Phase
    ig: Phase
    wg: Phase
    update_ns: int = 0
    line: int = 0             # where it was read (0: made in code)


@dataclass(frozen=True)
class Workload:
    """A SimAI workload file's content."""

    layers: tuple[Layer, ...]
    tp: int = 1
    ep: int = 1
    pp: int = 1
    gpus: int | None = None   # all_gpus (None: not given, the fabric's)
    pp_comm: int = 0
    vpp: int = 1
    ga: int = 1
    policy: str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"


def write(path: str | Path, w: Workload) -> Path:
    """Save ``w`` in SimAI's format (what AICB writes)."""
    head = [w.policy, "model_parallel_NPU_group:", str(w.tp), "ep:", str(w.ep), "pp:", str(w.pp),
            "vpp:", str(w.vpp), "ga:", str(w.ga)]
    if w.gpus is not None:
        head += ["all_gpus:", str(w.gpus)]
    head += ["checkpoints:", "0", "checkpoint_initiates:", "0"]
    if w.pp > 1:
        head += ["pp_comm:", str(w.pp_comm)]
    lines = [" ".join(head), str(len(w.layers))]
    for L in w.layers:
        cols = [L.name, "-1"]
        for p in (L.fwd, L.ig, L.wg):
            cols += [str(p.compute_ns), p.comm, str(p.size)]
        lines.append("\t".join(cols + [str(L.update_ns)]))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _int(text: str, where: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ImportRefused(f"{where}: {what}: an integer, found {text!r}") from None
    if value < 0 and what != "dependency":
        raise ImportRefused(f"{where}: {what}: >= 0, found {value}")
    return value


def read(path: str | Path) -> Workload:
    """Parse a SimAI workload file; errors name file:line and the column."""
    source = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ImportRefused(f"{source}: cannot read the SimAI workload: {e}") from e
    if len(lines) < 2:
        raise ImportRefused(f"{source}:1: a SimAI workload starts with the policy line and the layer count")
    tokens = lines[0].split()
    if not tokens or tokens[0] not in POLICIES:
        raise ImportRefused(f"{source}:1: policy {tokens[0] if tokens else ''!r}: one of {', '.join(POLICIES)}")
    keys = {"model_parallel_NPU_group": "tp", "ep": "ep", "pp": "pp", "all_gpus": "gpus",
            "pp_comm": "pp_comm", "vpp": "vpp", "ga": "ga"}
    head: dict[str, int] = {}
    for k, tok in enumerate(tokens[1:-1], 1):
        key = tok.rstrip(":")
        if key in keys:
            head[keys[key]] = _int(tokens[k + 1], f"{source}:1", tok)
    try:
        count = int(lines[1])
    except ValueError:
        raise ImportRefused(f"{source}:2: the number of layers, found {lines[1]!r}") from None
    body = [(n, line) for n, line in enumerate(lines[2:], 3) if line.strip()]
    if len(body) != count:
        raise ImportRefused(f"{source}:2: {count} layers announced, {len(body)} layer lines follow")
    layers = []
    for n, line in body:
        cols = line.split()
        where = f"{source}:{n}"
        if len(cols) < len(COLUMNS):
            raise ImportRefused(f"{where}: a layer has {len(COLUMNS)} columns ({' '.join(COLUMNS)}), "
                                f"found {len(cols)}")
        v = dict(zip(COLUMNS, cols))
        _int(v["dependency"], where, "dependency")
        phases = [Phase(_int(v[f"{p}_compute"], where, f"{p}_compute"), v[f"{p}_comm"],
                        _int(v[f"{p}_size"], where, f"{p}_size")) for p in ("fwd", "ig", "wg")]
        layers.append(Layer(v["name"], *phases, update_ns=_int(v["wg_update"], where, "wg_update"), line=n))
    return Workload(tuple(layers), tp=head.get("tp", 1), ep=head.get("ep", 1), pp=head.get("pp", 1),
                    gpus=head.get("gpus"), pp_comm=head.get("pp_comm", 0), vpp=head.get("vpp", 1),
                    ga=head.get("ga", 1), policy=tokens[0])


def _comm(comm: str, column: str, policy: str) -> tuple[str, str] | None:
    """(op, group kind) of a comm type in ``column`` (None for NONE)."""
    if comm == "NONE":
        return None
    for suffix, kind in SUFFIXES.items():
        base = comm[:len(comm) - len(suffix)] if suffix else comm
        if comm.endswith(suffix) and base in OPS:
            if kind is None:
                kind = "dp" if column == "wg" or policy == "DATA" else "tp"
            return OPS[base], kind
    return None


def to_trace(w: Workload, shape: Shape, scale: float, source: str, iterations: int = 1) -> Imported:
    """The trace of one pass of ``w`` on the fabric ``shape`` (module doc)."""
    par = Parallelism(w.gpus if w.gpus is not None else shape.gpus, w.tp, w.pp, w.ep)
    par.check(shape, f"{source}:1")
    if w.pp > 1 and w.pp_comm <= 0:
        raise ImportRefused(f"{source}:1: pp_comm: PP {w.pp} needs the bytes sent between stages, found {w.pp_comm}")
    counts = Counts()
    steps: list[Step] = []

    def phase(L: Layer, p: Phase, column: str) -> None:
        steps.append(Step(compute_ms=p.compute_ns / NS_PER_MS))
        where = f"{source}:{L.line}: {column}_comm"
        if p.comm == "NONE":
            return
        found = _comm(p.comm, column, w.policy)
        if found is None:
            raise ImportRefused(f"{where}: {p.comm!r} has no testbed collective (NONE, "
                                f"{', '.join(OPS)}, with _EP or _DP_EP)")
        if p.size <= 0:
            raise ImportRefused(f"{where}: {p.comm} of {p.size} bytes: a collective moves something")
        op, kind = found
        try:
            step = collective(op, kind, scaled(p.size, scale), par, shape)
        except ValueError:
            raise ImportRefused(f"{where}: {p.comm} over {kind} groups of one rank "
                                f"(TP {w.tp}, EP {w.ep}): nothing to send") from None
        steps.append(counts.add(step, p.size))

    def pipeline() -> None:
        if w.pp > 1:
            steps.append(counts.add(Step(op="sendrecv", group="pp", size=scaled(w.pp_comm, scale)), w.pp_comm))

    for L in w.layers:
        phase(L, L.fwd, "fwd")
    pipeline()
    for L in reversed(w.layers):
        phase(L, L.ig, "ig")
        phase(L, L.wg, "wg")
    pipeline()
    steps.append(Step(compute_ms=sum(L.update_ns for L in w.layers) / NS_PER_MS))
    merged = merge_compute(steps)
    if not any(s.op for s in merged):
        raise ImportRefused(f"{source}: no collective in any layer: nothing for the network to do")
    trace = Trace(name=Path(source).stem, iterations=iterations, steps=tuple(merged), ep=ep_shape(merged))
    notes = [f"TP {w.tp}, PP {w.pp}, EP {w.ep}, DP {par.dp} on {par.gpus} GPUs; compute in ns"]
    if w.gpus is None:
        notes.append("all_gpus not given: taken as the fabric's")
    if w.vpp > 1 or w.ga > 1:
        notes.append(f"vpp {w.vpp}, ga {w.ga}: one pass per iteration (not modelled)")
    return Imported(trace, source, FORMAT, scale, counts, notes)


def import_file(path: str | Path, shape: Shape, scale: float, iterations: int = 1) -> Imported:
    return to_trace(read(path), shape, scale, str(path), iterations)
