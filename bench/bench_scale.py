"""The flow-level model at the largest fabric it is given (`scale/`, docs/scale.md):
every demo configuration of a ring AllReduce per rail, evaluated from the spec and the
trace -- jobs, the agents' ports, hash-model paths, progressive filling, GOR's
placement. Figures: seconds for all configurations (``scale_s_all_configs``, the
issue's budget is 10 s), seconds per configuration (what dominates), the model's
busbw per configuration, the GPU count and the machine's load average."""

from __future__ import annotations

import os
import time
from pathlib import Path

from experiments.configs import CONFIGS, build_job
from scale.fabric import FabricIndex
from scale.model import evaluate_job
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
# The largest fabric the addressing plan allows (two tiers: 63 ports per switch).
SPEC = ROOT / "topo" / "fabrics" / "two-tier-max.yaml"
TRACE = ROOT / "traces" / "rail_allreduce.yaml"


def run() -> dict[str, float]:
    load = os.getloadavg()[0]
    started = time.perf_counter()
    index = FabricIndex(AddressPlan(load_spec(SPEC)))
    trace = load_trace(TRACE)
    figures: dict[str, float] = {"scale_s_index": time.perf_counter() - started}
    for c in CONFIGS.values():
        t0 = time.perf_counter()
        ev = evaluate_job(index, build_job(SPEC, TRACE, c, seed=1), trace, c.gor, name=c.name)
        figures[f"scale_s_{c.name}"] = time.perf_counter() - t0
        figures[f"scale_busbw_frac_{c.name}"] = ev.busbw_frac
    figures["scale_s_all_configs"] = time.perf_counter() - started
    figures["scale_gpus"] = float(ev.gpus)
    figures["scale_load_avg_1m"] = load
    return figures
