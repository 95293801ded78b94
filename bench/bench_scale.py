"""The flow-level model at scale (`scale/`, docs/scale.md): a ring AllReduce per rail
(traces/rail_allreduce.yaml) under the demo's configurations, evaluated from the spec
and the trace (`scale.model.evaluate`: the job, the agents' ports, hash-model paths,
progressive filling, GOR's planning).

* ``scale_100k_s_all``: all five (stock, stock-gor, rail, orthogonal, gor) on the
  102 400-GPU three-tier cluster (scale/fabrics/cluster-100k.yaml), everything included
  (the issue's budget: 10 s). What dominates: ``scale_100k_s_ports`` is the agents' own planning for one
  configuration (`scale.flows.job_step_flows`: ring orders and orthogonal ports),
  ``scale_100k_s_paths_rates`` the network model proper for stock's 204 800 flows
  (hash-model paths and progressive filling), ``scale_100k_gor_decision_s`` one GOR
  decision on that stock job (`scale.gor.replan`: demands, alarmed links, placement,
  prediction, ports of 60 000 moves; the issue's budget: 5 s).
* ``scale_1736_s_all``: all five on the largest two-tier fabric
  (scale/fabrics/two-tier-max.yaml).

busbw per configuration (``scale_*_busbw_frac_<config>``) and the load average at the
start (the machine is shared: seconds are worth what the load lets them be; hence
``scale_*_cpu_s_all`` too, the CPU seconds this process spent on the same run: what the
wall time comes to on an idle core, whatever ran beside it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from experiments.configs import CONFIGS, configured, hostfile_job, parse_configs
from scale.fabric import FabricIndex
from controller.fairness import max_min_rates
from scale.flows import job_step_flows
from scale.gor import replan
from scale.model import evaluate
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
FABRICS = ROOT / "scale" / "fabrics"
TRACE = ROOT / "traces" / "rail_allreduce.yaml"
CASES = (("100k", FABRICS / "cluster-100k.yaml", ",".join(CONFIGS)),
         ("1736", FABRICS / "two-tier-max.yaml", ",".join(CONFIGS)))


def _parts(spec: Path) -> dict[str, float]:
    """Seconds of the agents' planning and of the network model, apart."""
    index = FabricIndex(AddressPlan(load_spec(spec, emulated=False), emulated=False))
    base = hostfile_job(spec, TRACE, seed=1, emulated=False)
    trace = load_trace(TRACE)
    started = time.perf_counter()
    job_step_flows(index, configured(base, CONFIGS["orthogonal"]), trace)
    ports = time.perf_counter() - started
    (flows,) = job_step_flows(index, configured(base, CONFIGS["stock"]), trace)
    started = time.perf_counter()
    max_min_rates(index.paths(flows.src, flows.dst, flows.sport).links, index.capacity_bps, flows.unit)
    paths_rates = time.perf_counter() - started
    started = time.perf_counter()
    replan(index, flows.src, flows.dst, flows.sport)
    return {"s_ports": ports, "s_paths_rates": paths_rates, "gor_decision_s": time.perf_counter() - started}


def run() -> dict[str, float]:
    figures: dict[str, float] = {"scale_load_avg_1m": os.getloadavg()[0]}
    for label, spec, configs in CASES:
        started, cpu = time.perf_counter(), time.process_time()
        evaluations = evaluate(spec, TRACE, parse_configs(configs))
        figures[f"scale_{label}_s_all"] = time.perf_counter() - started
        figures[f"scale_{label}_cpu_s_all"] = time.process_time() - cpu
        for name, ev in evaluations.items():
            figures[f"scale_{label}_busbw_frac_{name}"] = ev.busbw_frac
        figures[f"scale_{label}_gpus"] = float(ev.gpus)
    figures.update({f"scale_100k_{k}": v for k, v in _parts(CASES[0][1]).items()})
    return figures
