"""The two-tenant scenario: two jobs on one fabric, each planned hash-orthogonally by
its own library, neither knowing the other -- as two customers' jobs on one cluster.

Tenant ``a`` has the first server of every block, tenant ``b`` the second; both run the
demo's trace on every rail, so on every leaf both send across the spines. Each library
colours only its own flows (`tccl.ports.orthogonal_ports`): with one QP per connection
and one flow per leaf, each gives its flow the first colour -- spine 0 -- so the two
tenants' flows meet on every leaf's first uplink and spine 0's downlinks, while the
other spine idles. Each library's plan is perfect for its job alone; only a controller
that sees both (GOR) can split them.

Per repeat, five runs on one fabric: ``alone-a`` and ``alone-b`` (each job by itself:
the ideal the shared runs are held against), ``shared`` (both at once, no GOR),
``shared-gor`` (both at once, GOR on) and ``shared-planned`` (both at once, tenant b
ported as a planner that saw both would: `coordinated_job` -- the best static plan,
so what the fabric gives two jobs sharing it without any collision). A shared run has a row per tenant
(``shared:a``, ``shared:b``, ...): its busbw from its own agents' iterations.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any, Mapping

from experiments import collisions
from experiments.configs import CONFIGS, nvlink_gbps
from experiments.metrics import step_costs
from experiments.recorder import Recorder
from experiments.runner import Experiment, RecordedRun, Settings, prepare, record_run, write_summary
from experiments.table import format_table
from tccl import collectives as C
from tccl.agent import port_function
from tccl.job import Job, Transport, Workload, job_from_fabric
from tccl.launch import run_jobs
from tccl.trace import load_trace
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, predict_path
from topo.spec import load_spec

TENANTS = ("a", "b")
# One QP per connection: each tenant's library then gives its one flow per leaf the
# first colour, so the tenants collide on spine 0 everywhere (with two QPs each would
# use both spines and the fabric would be balanced by chance).
TENANT_QPS = 1
# The runs of one repeat: which tenants run (a "+" tenant: `coordinated_job`), and
# whether GOR is on.
RUNS = {"alone-a": (("a",), False), "alone-b": (("b",), False),
        "shared": (TENANTS, False), "shared-gor": (TENANTS, True),
        "shared-planned": (("a", "b+"), False)}
# Seeds tried for tenant b's coordinated ports: each of its 8 flows lands on the free
# spine with probability 1/2, so one seed in 256 does on the default fabric.
MAX_SEEDS = 20_000


def tenant_job(spec_file: str | Path, trace_file: str | Path, tenant: str, seed: int) -> Job:
    """Tenant ``tenant``'s job: the ranks of server ``TENANTS.index(tenant)`` of every
    block (all rails), rail-aware ring order, hash-orthogonal ports, ranks renumbered
    from 0."""
    index = TENANTS.index(tenant)
    plan = AddressPlan(load_spec(spec_file))
    base = job_from_fabric(spec_file, Workload(op="allreduce", trace=str(trace_file), order="rail", check=False),
                           Transport(ports="orthogonal", seed=seed, nvlink_gbps=nvlink_gbps(plan.spec),
                                     qps=TENANT_QPS),
                           name=f"tenant-{tenant}")
    servers = {plan.server_at(b, index).name for b in range(plan.spec.blocks)}
    mine = [r for r in base.ranks if r.server in servers]
    ranks = tuple(dataclasses.replace(r, rank=k) for k, r in enumerate(mine))
    return dataclasses.replace(base, ranks=ranks)


def coordinated_job(spec_file: str | Path, trace_file: str | Path, seed: int) -> Job:
    """Tenant b's job as a planner that saw both tenants would port it: every flow on
    a spine tenant a's plan leaves free (random ports of the first seed that does so,
    checked with the hash model). The ``shared-planned`` run: the best static plan for
    the two jobs, what GOR's moves are measured against besides each job alone."""
    plan = AddressPlan(load_spec(spec_file))
    trace = load_trace(trace_file)
    taken = {link for link in _uplinks(plan, tenant_job(spec_file, trace_file, "a", seed), trace)}
    base = tenant_job(spec_file, trace_file, "b", seed)
    for k in range(MAX_SEEDS):
        job = dataclasses.replace(base, transport=dataclasses.replace(base.transport, ports="random", seed=k),
                                  name="tenant-b-planned")
        if not _uplinks(plan, job, trace) & taken:
            return job
    raise ValueError(f"no seed below {MAX_SEEDS} keeps tenant b off tenant a's spines")


def _uplinks(plan: AddressPlan, job: Job, trace: Any) -> set[tuple[str, str]]:
    """The directed leaf-spine and spine-leaf links of the job's planned flows."""
    _, planned = port_function(job, C.ring_order(job.ranks, job.workload.order), trace)
    ranks = {r.rank: r for r in job.ranks}
    links = set()
    for key, sport in planned.items():
        a, b = (ranks[int(x)] for x in key.split("#")[0].split("->"))
        path = predict_path(plan, FiveTuple(a.ip, b.ip, sport=sport))
        links.update(zip(path[1:-1], path[2:-1]))
    return links


def launch_jobs(fabric: Any, jobs: list[Job], run_dir: Path, timeout_s: float) -> dict[str, dict[str, Any]]:
    """Start every job's agents at once in ``run_dir`` (a job file each: ``job-<name>.yaml``)
    and wait for all (`tccl.launch.run_jobs`); results by server."""
    files = {run_dir / f"job-{job.name}.yaml": job for job in jobs}
    for path, job in files.items():
        job.save(path)
    return run_jobs(fabric, files, run_dir, timeout_s)


def tenant_numbers(run: RecordedRun, job: Job, exp: Experiment) -> dict[str, Any]:
    """A tenant's numbers from a run: its own agents' iterations against its own ideal."""
    bottleneck = exp.bottleneck_mbps * 1e6
    ideal = sum(c.ideal_s for c in step_costs(exp.trace, job.ranks, bottleneck, nvlink_gbps(exp.spec) * 1e9))
    return run.numbers(ideal, exp.compute_s, {r.server for r in job.ranks})


def ratios(configs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per tenant: shared-gor / shared and shared-gor / alone (busbw), and their means
    over the tenants -- the scenario's verdict."""
    out: dict[str, Any] = {}
    for t in TENANTS:
        gor, shared, alone, planned = (configs.get(f"{k}:{t}", {}).get("busbw_frac")
                                       for k in ("shared-gor", "shared", "alone", "shared-planned"))
        out[t] = {"gor_over_shared": round(gor / shared, 3) if gor and shared else None,
                  "gor_over_alone": round(gor / alone, 3) if gor and alone else None,
                  "gor_over_planned": round(gor / planned, 3) if gor and planned else None}
    for key in ("gor_over_shared", "gor_over_alone", "gor_over_planned"):
        vals = [out[t][key] for t in TENANTS if out[t][key] is not None]
        out[f"mean_{key}"] = round(statistics.fmean(vals), 3) if vals else None
    return out


def format_tenants_table(configs: Mapping[str, Mapping[str, Any]]) -> str:
    r = ratios(configs)
    lines = [format_table(configs), "", "two tenants, busbw ratios (per tenant; mean):"]
    for t in TENANTS:
        lines.append(f"  tenant {t}: shared-gor / shared {r[t]['gor_over_shared']}, "
                     f"shared-gor / alone {r[t]['gor_over_alone']}, "
                     f"shared-gor / shared-planned {r[t]['gor_over_planned']}")
    lines.append(f"  mean: shared-gor / shared {r['mean_gor_over_shared']}, "
                 f"shared-gor / alone {r['mean_gor_over_alone']}, "
                 f"shared-gor / shared-planned {r['mean_gor_over_planned']}")
    return "\n".join(lines)


def run_tenants(settings: Settings) -> dict[str, Any]:
    """The scenario (module docstring), ``repeats`` times; summary.json and the table."""
    from controller.routes import program_fabric
    from topo.net import Fabric

    exp = prepare(dataclasses.replace(settings, configs=(CONFIGS["orthogonal"],)))
    trace_file = exp.out / "trace.yaml"
    jobs = {t: tenant_job(exp.spec_file, trace_file, t, settings.seed) for t in TENANTS}
    jobs["b+"] = coordinated_job(exp.spec_file, trace_file, settings.seed)
    plan = AddressPlan(exp.spec)
    trace = load_trace(trace_file)
    for t in TENANTS:
        exp.models[f"alone:{t}"] = collisions.analyse(plan, jobs[t], trace)
    exp.log("two tenants: " + "; ".join(f"{t}: {', '.join(sorted({exp.name(r.server) for r in jobs[t].ranks}))}"
                                        for t in TENANTS))
    with Fabric(exp.spec, run_dir=exp.out / "fabric", program=program_fabric) as fabric:
        recorder = Recorder(fabric.plan, settings.interval_s, fabric.clock).start()
        try:
            for rep in range(settings.repeats):
                for name, (tenants, with_gor) in RUNS.items():
                    run_dir = exp.out / name / f"rep{rep + 1}"
                    mine = [jobs[t] for t in tenants]
                    run = record_run(exp, fabric, recorder, with_gor, run_dir,
                                     lambda: launch_jobs(fabric, mine, run_dir, settings.timeout_s))
                    for t in tenants:
                        row = f"{name.split('-')[0] if name.startswith('alone') else name}:{t[0]}"
                        numbers = tenant_numbers(run, jobs[t], exp)
                        exp.repeats.setdefault(row, []).append(numbers)
                        exp.log(f"repeat {rep + 1}/{settings.repeats} {row:14s} busbw/link "
                                f"{numbers['busbw_frac']:.2f} (2..N {numbers['busbw_frac_rest']:.2f}), "
                                f"GOR moves {numbers['gor_moves']}")
        finally:
            recorder.stop()
    for row in exp.repeats:
        exp.models.setdefault(row, {})
    return write_summary(exp, {"scenario": "tenants", "ratios": ratios_of(exp)}, table=format_tenants_table)


def ratios_of(exp: Experiment) -> dict[str, Any]:
    """`ratios` over the medians of the repeats."""
    return ratios({row: {"busbw_frac": statistics.median(r["busbw_frac"] for r in reps)}
                   for row, reps in exp.repeats.items()})
