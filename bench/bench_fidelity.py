"""Load independence: the demo's orthogonal and stock configurations on an otherwise idle
machine, then with two CPU-bound processes of normal priority beside the fabric.

A faithful emulation gives the same numbers whatever else the machine does (its
processes run at real-time priority, its time is emulated): the figures
``busbw_loaded_over_idle_<config>`` (busbw with the load over busbw without, goal >=
0.95) say how well that holds, ``fidelity_p99_pkt_<idle|loaded>_<config>`` and
``faithful_<idle|loaded>_<config>`` (1 or 0) what the fidelity monitor saw in each run.

Idle and loaded runs alternate (idle, loaded, idle, loaded) on one fabric, so a drift of
the machine spreads over both; the busbw of each is the median of its runs. The load is
two ``python -c 'while True: pass'`` processes, one per core of the reference machine,
started and ended by PID around each loaded run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments.configs import CONFIGS
from experiments.runner import Settings, prepare, run_once, running_fabric
from topo.processes import stop_process

CONFIG_NAMES = ("orthogonal", "stock")
ROUNDS = 2          # idle/loaded pairs per configuration
HOGS = 2            # CPU-bound processes beside the fabric in the loaded runs
ITERATIONS = 3


def _hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_fidelity needs root (Mininet)")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
        settings = Settings(repeats=1, iterations=ITERATIONS, out=Path(tmp),
                            configs=tuple(CONFIGS[n] for n in CONFIG_NAMES))
        exp = prepare(settings, log=lambda _: None)
        runs: dict[tuple[str, str], list[dict]] = {}
        with running_fabric(exp, exp.spec, exp.out / "fabric") as (fabric, recorder):
            for k in range(ROUNDS):
                for name in CONFIG_NAMES:
                    for load in ("idle", "loaded"):
                        hogs = _hogs(HOGS) if load == "loaded" else []
                        try:
                            numbers = run_once(exp, fabric, recorder, CONFIGS[name],
                                               exp.out / name / f"{load}{k}")
                        finally:
                            for hog in hogs:
                                stop_process(hog, 5)
                        runs.setdefault((name, load), []).append(numbers)
    for name in CONFIG_NAMES:
        busbw = {load: statistics.median(r["busbw_frac"] for r in runs[(name, load)])
                 for load in ("idle", "loaded")}
        figures[f"busbw_idle_{name}"] = busbw["idle"]
        figures[f"busbw_loaded_{name}"] = busbw["loaded"]
        figures[f"busbw_loaded_over_idle_{name}"] = busbw["loaded"] / busbw["idle"]
        for load in ("idle", "loaded"):
            fid = [r["fidelity"] for r in runs[(name, load)]]
            figures[f"fidelity_p99_pkt_{load}_{name}"] = max(f["p99_lateness_pkt"] for f in fid)
            figures[f"faithful_{load}_{name}"] = float(all(f["faithful"] for f in fid))
    return figures
