"""Results as nccl-tests prints them, and saved as JSON.

Bandwidths follow nccl-tests (doc/PERFORMANCE.md): ``algbw = size / time``, and the
bus bandwidth ``busbw`` corrects algbw by the fraction of the data each rank must move
over its slowest link, so that busbw is comparable with the link rate whatever the
number of ranks:

* AllReduce: busbw = algbw * 2(n-1)/n
* AllGather, ReduceScatter, AllToAll: busbw = algbw * (n-1)/n
* SendRecv: busbw = algbw

Our links run at Mbit/s, so bandwidths print in Mbit/s (nccl-tests: GB/s).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from emulation.fidelity import dilation_covering

ELEMENT = ("uint8", 1)     # XOR works per byte: count = bytes


def bus_factor(op: str, n: int) -> float:
    """busbw / algbw for ``op`` on ``n`` ranks (nccl-tests' formulas)."""
    if n < 1:
        raise ValueError(f"a collective has at least one rank, got {n}")
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    if op in ("sendrecv", "broadcast", "reduce"):
        return 1.0
    raise ValueError(f"no bus bandwidth formula for {op!r}")


@dataclass(frozen=True)
class Row:
    """One line of output: one message size."""

    op: str
    size: int
    count: int
    type: str
    redop: str
    time_us: float          # mean over the timed iterations, slowest local rank
    algbw_mbps: float
    busbw_mbps: float
    wrong: int              # ranks whose result differed from the expected one (-1: unchecked)

    @classmethod
    def measure(cls, op: str, size: int, nranks: int, seconds: float, wrong: int) -> "Row":
        alg = size * 8 / seconds / 1e6 if seconds > 0 else 0.0
        return cls(op=op, size=size, count=size // ELEMENT[1], type=ELEMENT[0],
                   redop="bxor" if op in ("allreduce", "reducescatter") else "none",
                   time_us=seconds * 1e6, algbw_mbps=alg, busbw_mbps=alg * bus_factor(op, nranks),
                   wrong=wrong)


HEADER = ("#       size         count      type   redop        time     algbw     busbw  #wrong\n"
          "#        (B)    (elements)                          (us)    (Mb/s)    (Mb/s)")


def format_row(row: Row) -> str:
    wrong = "N/A" if row.wrong < 0 else str(row.wrong)
    return (f"{row.size:12d}  {row.count:12d}  {row.type:>8s}  {row.redop:>6s}  {row.time_us:10.1f}"
            f"  {row.algbw_mbps:8.3f}  {row.busbw_mbps:8.3f}  {wrong:>6s}")


def dilation_needed(fid: Mapping[str, Any]) -> float:
    """The dilation at which an agent's p99 lateness, as long in wall time, would be
    within the bound (`emulation.fidelity.dilation_covering`), from its fidelity
    (`tccl.engine.Engine.fidelity`): its departures or its handling, the later."""
    return dilation_covering(fid["dilation"], max(fid["tx"]["p99_frames"], fid["rx"]["p99_frames"]))


def format_fidelity(fid: dict[str, Any]) -> str:
    """One comment line on an agent's fidelity (`tccl.engine.Engine.fidelity`)."""
    tx, rx = fid["tx"], fid["rx"]
    verdict = "faithful" if fid["faithful"] else "UNFAITHFUL"
    needed = dilation_needed(fid)
    fits = f"; as late in wall time, it would fit at dilation {needed:g}" if needed > fid["dilation"] else ""
    return (f"# fidelity ({verdict}, dilation {fid['dilation']:g}): departures on time "
            f"{tx['on_time_frac']:.1%}, p99 lateness {tx['p99_us'] / 1e3:.2f} ms ({tx['p99_frames']:.2f} "
            f"frame times); frames handled p99 {rx['p99_us'] / 1e3:.2f} ms ({rx['p99_frames']:.2f} frame "
            f"times) after arrival; kernel drops {fid['kernel_drops']}{fits}")


def save(path: str | Path, meta: dict[str, Any], rows: Iterable[Row]) -> None:
    """Write one run: its description (``meta``) and the rows."""
    Path(path).write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2),
                          encoding="utf-8")
