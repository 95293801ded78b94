"""``make bench``: run every benchmark, print one table, write ``results/latest.json``.

``python -m bench NAME...`` runs only ``bench_NAME`` modules and updates their figures.

Each ``bench/bench_*.py`` module exposes ``run() -> dict[str, float]`` returning named
figures with the unit in the name (``pipeline_kpps_64B``). The JSON is one flat object
so later parts of the system simply add their figures; a benchmark that fails is
reported and leaves its figures out rather than hiding the failure.

Beside each benchmark's time, the share of the machine's CPU time its hypervisor stole
meanwhile (`emulation.host`), and over the whole run as ``host_steal_frac``: on a
virtual machine a busy neighbour slows the fabric's figures and makes its runs
unfaithful, which the load average does not show.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

from emulation.host import cpu_ticks, steal_share

RESULTS = Path(__file__).parent / "results" / "latest.json"


def main(argv: list[str]) -> int:
    only = set(argv)
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                   if m.name.startswith("bench_"))
    figures: dict[str, float] = {}
    failed = []
    first = cpu_ticks()
    for name in names:
        if only and name.removeprefix("bench_") not in only:
            continue
        started, ticks = time.perf_counter(), cpu_ticks()
        print(f"# {name} ...", file=sys.stderr, flush=True)
        try:
            figures.update(importlib.import_module(f"bench.{name}").run())
        except Exception:  # one broken benchmark must not hide the others' numbers
            traceback.print_exc()
            failed.append(name)
        print(f"# {name}: {time.perf_counter() - started:.1f} s{_steal(ticks)}", file=sys.stderr)
    steal = steal_share(first, cpu_ticks())
    if steal is not None and figures:
        figures["host_steal_frac"] = steal
    width = max((len(k) for k in figures), default=10)
    print(f"{'figure':<{width}}  value")
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:.4g}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if only and RESULTS.exists():  # a partial run updates its figures, keeps the others
        figures = {**json.loads(RESULTS.read_text()), **figures}
    RESULTS.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    print(f"wrote {RESULTS}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _steal(since: dict[str, int]) -> str:
    share = steal_share(since, cpu_ticks())
    return f", host steal {100 * share:.0f} %" if share is not None else ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
