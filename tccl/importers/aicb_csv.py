"""AICB's per-collective CSV: one row per collective (or compute phase) of one rank's
iteration, in order::

    comm_type,comm_group,comm_group_size,msg_size,stage,dst,src,additional,_elapsed_time,...
    CommType.all_reduce,CommGroup.tp_group,4,1048576,forward.layer0,None,None,,None,...
    CommType.computation,None,None,None,forward.layer0,None,None,,1.5,...

``comm_type`` (``CommType.`` prefix optional): ``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``broadcast``, ``reduce``, ``isend``/``send`` (to the
next pipeline stage), ``irecv``/``recv`` (the other end of a send: not counted again),
``barrier`` (no bytes: skipped), ``computation`` (``_elapsed_time`` in ms); ``comm_group``
(``CommGroup.`` prefix and ``_group`` suffix optional): ``tp``, ``dp``, ``pp``, ``ep``,
``dp_ep``. The degrees of parallelism come from the groups' sizes (TP from ``tp``
rows, and so on; 1 when a kind never appears), the GPU count from TP x PP x DP. Rows
of a ``stage`` starting with ``init`` are the model's set-up, not an iteration's: they
are skipped, and the summary says how many.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tccl.importers.common import (Counts, Imported, ImportRefused, Parallelism, Shape, collective, ep_shape,
                                   merge_compute, scaled)
from tccl.trace import Step, Trace

FORMAT = "aicb"
COLUMNS = ("comm_type", "comm_group", "comm_group_size", "msg_size", "stage", "dst", "src", "additional",
           "_elapsed_time", "algbw", "busbw", "count")
REQUIRED = ("comm_type", "comm_group", "comm_group_size", "msg_size")
OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
       "all_to_all": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "isend": "sendrecv",
       "send": "sendrecv"}
SKIPPED = ("irecv", "recv", "barrier")
GROUPS = {"tp": "tp", "dp": "dp", "pp": "pp", "ep": "ep", "dp_ep": "dp_ep", "ep_dp": "dp_ep"}


@dataclass(frozen=True)
class Row:
    """One CSV row: a collective (``op`` in ``group`` of ``group_size``, ``size``
    bytes) or a compute phase (``op`` ``computation``, ``elapsed_ms``)."""

    op: str
    group: str = "None"
    group_size: int = 0
    size: int = 0
    stage: str = ""
    elapsed_ms: float = 0.0


def write(path: str | Path, rows: Sequence[Row]) -> Path:
    """Save ``rows`` as AICB writes them (``CommType.``/``CommGroup.`` names)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for r in rows:
            compute = r.op == "computation"
            out.writerow([f"CommType.{r.op}", "None" if compute else f"CommGroup.{r.group}_group",
                          "None" if compute else r.group_size, "None" if compute else r.size, r.stage,
                          "None", "None", "", r.elapsed_ms if compute else "None", "None", "None", 1])
    return path


def _name(text: str, prefix: str, suffix: str = "") -> str:
    text = text.strip()
    text = text[len(prefix):] if text.startswith(prefix) else text
    return text[:-len(suffix)] if suffix and text.endswith(suffix) else text


def _number(text: str, where: str, column: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise ImportRefused(f"{where}: {column}: a number, found {text!r}") from None
    if value < 0:
        raise ImportRefused(f"{where}: {column}: >= 0, found {value}")
    return value


def read(path: str | Path) -> list[tuple[int, Row]]:
    """The rows of an AICB CSV with their line numbers; errors name file:line."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ImportRefused(f"{source}: cannot read the AICB CSV: {e}") from e
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise ImportRefused(f"{source}:1: an AICB CSV needs the columns {', '.join(REQUIRED)}; missing {missing}")
    rows = []
    for n, raw in enumerate(reader, 2):
        where = f"{source}:{n}"
        op = _name(raw["comm_type"] or "", "CommType.")
        if op == "computation":
            elapsed = _number(raw.get("_elapsed_time") or "0", where, "_elapsed_time", float)
            rows.append((n, Row("computation", stage=raw.get("stage") or "", elapsed_ms=elapsed)))
            continue
        group = _name(raw["comm_group"] or "", "CommGroup.", "_group")
        size = int(_number(raw["msg_size"] or "", where, "msg_size", int)) if op not in SKIPPED else 0
        gsize = int(_number(raw["comm_group_size"] or "", where, "comm_group_size", int)) \
            if op not in SKIPPED else 0
        rows.append((n, Row(op, group, gsize, size, raw.get("stage") or "")))
    return rows


def _degrees(rows: list[tuple[int, Row]], source: str) -> dict[str, int]:
    """Group kind -> its size, the same on every row of that kind (set-up rows aside)."""
    sizes: dict[str, int] = {}
    for n, r in rows:
        if r.op in OPS and GROUPS.get(r.group) in ("tp", "dp", "pp", "ep") and not r.stage.startswith("init"):
            kind = GROUPS[r.group]
            if sizes.setdefault(kind, r.group_size) != r.group_size:
                raise ImportRefused(f"{source}:{n}: comm_group_size {r.group_size}: earlier {kind} rows "
                                    f"had {sizes[kind]}")
    return sizes


def to_trace(rows: list[tuple[int, Row]], shape: Shape, scale: float, source: str,
             iterations: int = 1) -> Imported:
    """The trace of the rows in order on the fabric ``shape`` (module doc)."""
    deg = _degrees(rows, source)
    tp, pp, ep = deg.get("tp", 1), deg.get("pp", 1), deg.get("ep", 1)
    gpus = tp * pp * deg["dp"] if "dp" in deg else shape.gpus
    par = Parallelism(gpus, tp, pp, ep)
    par.check(shape, f"{source}:1")
    counts = Counts()
    steps: list[Step] = []
    skipped = {"init": 0, "barrier/recv": 0}
    for n, r in rows:
        where = f"{source}:{n}"
        if r.stage.startswith("init"):
            skipped["init"] += 1
            continue
        if r.op == "computation":
            steps.append(Step(compute_ms=r.elapsed_ms))
            continue
        if r.op in SKIPPED:
            skipped["barrier/recv"] += 1
            continue
        if r.op not in OPS:
            raise ImportRefused(f"{where}: comm_type {r.op!r} has no testbed collective "
                                f"(known: {', '.join([*OPS, *SKIPPED, 'computation'])})")
        kind = GROUPS.get(r.group)
        if kind is None:
            raise ImportRefused(f"{where}: comm_group {r.group!r}: one of {', '.join(GROUPS)}")
        if r.size <= 0:
            raise ImportRefused(f"{where}: msg_size 0: a collective moves something")
        if (OPS[r.op] == "sendrecv") != (kind == "pp"):
            raise ImportRefused(f"{where}: {r.op} in {kind}: sends go to the next pipeline stage only")
        if kind == "pp":
            steps.append(counts.add(Step(op="sendrecv", group="pp", size=scaled(r.size, scale)), r.size))
            continue
        want = len(par.groups(kind)[0])
        if r.group_size != want:
            raise ImportRefused(f"{where}: comm_group_size {r.group_size}: {kind} groups have {want} "
                                f"ranks on this fabric (TP {tp}, PP {pp}, EP {ep}, DP {par.dp})")
        steps.append(counts.add(collective(OPS[r.op], kind, scaled(r.size, scale), par, shape), r.size))
    merged = merge_compute(steps)
    if not any(s.op for s in merged):
        raise ImportRefused(f"{source}: no collective outside the set-up rows: nothing for the network to do")
    notes = [f"TP {tp}, PP {pp}, EP {ep}, DP {par.dp} on {gpus} GPUs; computation in ms",
             f"skipped {skipped['init']} set-up (init) rows, {skipped['barrier/recv']} barrier/receive rows"]
    trace = Trace(name=Path(source).stem, iterations=iterations, steps=tuple(merged), ep=ep_shape(merged))
    return Imported(trace, source, FORMAT, scale, counts, notes)


def import_file(path: str | Path, shape: Shape, scale: float, iterations: int = 1) -> Imported:
    return to_trace(read(path), shape, scale, str(path), iterations)
