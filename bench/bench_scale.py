"""The flow-level model at scale (`scale/`, docs/scale.md): a ring AllReduce per rail
(traces/rail_allreduce.yaml) under the demo's configurations, evaluated from the spec
and the trace -- the job, the agents' ports, hash-model paths, progressive filling,
GOR's planning.

* On the 102 400-GPU three-tier cluster (scale/fabrics/cluster-100k.yaml): stock, rail,
  orthogonal and gor; ``scale_100k_s_all`` is their sum with the job and the index
  (the issue's budget: 10 s), ``scale_100k_s_<config>`` each one, what dominates.
* stock-gor -- GOR's placement of every colliding flow of a stock job -- runs
  controller.placement's scalar Global First Fit over every spine-crossing flow: on
  the largest two-tier fabric (1736 GPUs, scale/fabrics/two-tier-max.yaml) here,
  ``scale_1736_s_stock-gor``, with the other configurations there for comparison.

busbw per configuration (``scale_*_busbw_frac_<config>``) and the load average at the
start (the machine is shared: seconds are worth what the load lets them be)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from experiments.configs import CONFIGS, configured, hostfile_job
from scale.fabric import FabricIndex
from scale.model import evaluate_job
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
FABRICS = ROOT / "scale" / "fabrics"
TRACE = ROOT / "traces" / "rail_allreduce.yaml"
CASES = (("100k", FABRICS / "cluster-100k.yaml", ("stock", "rail", "orthogonal", "gor")),
         ("1736", FABRICS / "two-tier-max.yaml", tuple(CONFIGS)))


def run() -> dict[str, float]:
    figures: dict[str, float] = {"scale_load_avg_1m": os.getloadavg()[0]}
    trace = load_trace(TRACE)
    for label, spec, configs in CASES:
        started = time.perf_counter()
        index = FabricIndex(AddressPlan(load_spec(spec, emulated=False), emulated=False))
        base = hostfile_job(spec, TRACE, seed=1, emulated=False)
        figures[f"scale_{label}_s_job"] = time.perf_counter() - started
        for name in configs:
            t0 = time.perf_counter()
            c = CONFIGS[name]
            ev = evaluate_job(index, configured(base, c), trace, c.gor, name=name)
            figures[f"scale_{label}_s_{name}"] = time.perf_counter() - t0
            figures[f"scale_{label}_busbw_frac_{name}"] = ev.busbw_frac
        figures[f"scale_{label}_s_all"] = time.perf_counter() - started
        figures[f"scale_{label}_gpus"] = float(ev.gpus)
    return figures
