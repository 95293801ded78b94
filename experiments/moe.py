"""The MoE scenario (``make demo SCENARIO=moe``): expert-parallel all-to-all and the
NVLink + RoCE split of tensor parallelism, on one fabric.

Runs (``RUNS``; one job of every NIC, rail-aware order, random source ports, NVLink
between the ranks of a server):

* ``ep-rail``: `traces/moe.yaml`, EP groups on one rail each (Megatron's layout);
* ``ep-spread``: the same servers per group, every member on another rail: each
  exchange between servers changes rail, so it crosses a spine;
* ``ep-spread-pxn``: spread, with PXN relays (`tccl.collectives.pxn_plan`): a
  cross-rail message hops over NVLink to the server-mate on its destination's rail;
* ``ep-spread-gor``: spread, GOR on -- many short flows for it to move;
* ``hot-expert``: rail, the all-to-alls skewed ``HOT_WEIGHTS`` towards each group's
  first rank: an incast into its NIC (PFC pauses, ECN marks, DCQCN's CNPs);
* ``tp-nvlink`` / ``tp-roce`` / ``tp-split``: `traces/tp_heavy.yaml` over NVLink only,
  over the NICs only (no NVLink), and split over both by `SplitBalancer`.

Every run checks every result (``wrong``) and reports bytes per channel. busbw here is
nccl-tests' bus bytes of the iteration's collectives over their time, in Mbit/s (one
yardstick for NVLink and NIC runs alike).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from experiments.configs import CONFIGS, QPS, nvlink_gbps, prepare_trace
from experiments.metrics import compute_seconds, step_costs
from experiments.runner import ROOT, Settings, prepare, record_run, running_fabric, write_summary
from experiments.metrics import median_of
from tccl.job import Job, Transport, Workload, job_from_fabric
from tccl.launch import run_on_fabric
from tccl.trace import Trace, load_trace, trace_document
from tccl.traffic import CHANNELS, traffic_line
from topo.spec import load_spec

MOE_TRACE = ROOT / "traces" / "moe.yaml"
TP_TRACE = ROOT / "traces" / "tp_heavy.yaml"
# A hot expert: each EP group's first rank gets 8x the tokens of any other.
HOT_WEIGHTS = (8, 1, 1, 1)
# NVLink of the TP runs: twice a NIC (20 Mbit/s against 10; `nvlink_gbps` restates it
# for the fabric's NICs), with NVLink's real
# latency (200 ns; RoCE's is what the emulated fabric gives: frames on two links).
# Against the demo's 100x NVLink the NICs would add 1 %; at 2x the split has
# something to win, and the latency term decides the small AllReduce.
TP_NVLINK_GBPS = 0.02
TP_NVLINK_LATENCY_US = 0.2


@dataclass(frozen=True)
class MoeRun:
    """One run of the scenario (module doc)."""

    name: str
    trace: str = "moe"            # moe | tp
    layout: str = "rail"          # EP groups: rail | spread
    hot: bool = False
    pxn: bool = False
    gor: bool = False
    nvlink: str = "on"            # tp runs: on | off | split


RUNS: dict[str, MoeRun] = {r.name: r for r in (
    MoeRun("ep-rail"),
    MoeRun("ep-spread", layout="spread"),
    MoeRun("ep-spread-pxn", layout="spread", pxn=True),
    MoeRun("ep-spread-gor", layout="spread", gor=True),
    MoeRun("hot-expert", hot=True),
    MoeRun("tp-nvlink", trace="tp"),
    MoeRun("tp-roce", trace="tp", nvlink="off"),
    MoeRun("tp-split", trace="tp", nvlink="split"),
)}


def parse_runs(text: str) -> list[MoeRun]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in RUNS]
    if unknown or not names:
        raise ValueError(f"--configs: unknown MoE run(s) {unknown or text!r}; choose from {', '.join(RUNS)}")
    return [RUNS[n] for n in names]


def run_trace(base: Trace, run: MoeRun) -> Trace:
    """``base`` as ``run`` changes it: the EP layout, the hot expert's weights."""
    if run.trace != "moe":
        return base
    if base.ep is None:
        raise ValueError(f"{run.name}: the MoE trace needs an `ep` shape")
    ep = dataclasses.replace(base.ep, layout=run.layout)
    steps = []
    for s in base.steps:
        if s.group == "ep":
            weights = HOT_WEIGHTS[:ep.size] + (1,) * (ep.size - len(HOT_WEIGHTS)) if run.hot else s.weights
            s = dataclasses.replace(s, ep=ep, weights=tuple(float(w) for w in weights))
        steps.append(s)
    return dataclasses.replace(base, ep=ep, steps=tuple(steps))


def run_job(spec_file: Path, trace_file: Path, run: MoeRun, seed: int) -> Job:
    """``run``'s job over every NIC of the fabric (module doc)."""
    spec = load_spec(spec_file)
    if run.trace == "tp":
        nvlink = 0.0 if run.nvlink == "off" else nvlink_gbps(spec, TP_NVLINK_GBPS)
        t = Transport(seed=seed, qps=QPS, nvlink_gbps=nvlink, nvlink_latency_us=TP_NVLINK_LATENCY_US,
                      tp_split=run.nvlink == "split")
    else:
        t = Transport(seed=seed, qps=QPS, nvlink_gbps=nvlink_gbps(spec), pxn=run.pxn)
    return job_from_fabric(spec_file, Workload(trace=str(trace_file), order="rail", check=True), t,
                           name=f"moe-{run.name}")


def bus_bits(trace: Trace, job: Job) -> float:
    """nccl-tests' bus bits of one iteration's collectives (skewed all-to-alls by their
    hottest destination): busbw = this / communication time."""
    return sum(c.ideal_s for c in step_costs(trace, job.ranks, 1.0))


def run_numbers(results: Mapping[str, Mapping[str, Any]], numbers: Mapping[str, Any], trace: Trace,
                job: Job) -> dict[str, Any]:
    """The scenario's extra numbers of one run: busbw in Mbit/s, NIC PAUSE frames and
    paused seconds, wrong results, bytes per channel."""
    comm = numbers["iteration_s"] - compute_seconds(trace)
    pfc = [nic for r in results.values() for nic in r.get("pfc", {}).values()]
    return {"busbw_mbps": round(bus_bits(trace, job) / comm / 1e6, 3) if comm > 0 else None,
            "nic_pauses": int(sum(n["pause_rx"] for n in pfc)),
            "nic_paused_s": round(sum(n["paused_s"] for n in pfc), 4),
            "wrong": sum(int(r.get("trace_wrong", 0)) + int(r.get("tp_split_wrong", 0)) for r in results.values()),
            "tp_nvlink_share": [round(s, 3) for s in next(iter(results.values())).get("tp_nvlink_share", [])],
            **{f"{c}_bytes": numbers["traffic"]["bytes_by_channel"][c] for c in CHANNELS}}


COLUMNS = (("run", None), ("iter s", "iteration_s"), ("busbw Mbit/s", "busbw_mbps"),
           ("NVLink KiB", "nvlink_bytes"), ("leaf KiB", "leaf_bytes"), ("spine KiB", "spine_bytes"),
           ("ECN marks", "ecn_marks"), ("CNPs", "cnps"), ("NIC pauses", "nic_pauses"), ("drops", "drops"),
           ("GOR moves", "gor_moves"), ("wrong", "wrong"), ("fidelity (dilation)", "fidelity"))


def _cell(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if key == "fidelity":
        f = value or {}
        if not f:
            return "-"
        verdict = "ok" if f["faithful"] else f"UNFAITHFUL {f['unfaithful_repeats']}/{f['repeats']}"
        return f"{verdict} ({f['dilation']:g})"
    if value is None:
        return "-"
    if key.endswith("_bytes"):
        return f"{value / 1024:.0f}"
    if key == "iteration_s":
        return f"{value:.3f}"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def format_moe_table(configs: Mapping[str, Mapping[str, Any]]) -> str:
    """The scenario's table, then the TP split's NVLink shares and the verdicts."""
    rows = [[h for h, _ in COLUMNS]] + [[name] + [_cell(row, k) for _, k in COLUMNS[1:]]
                                        for name, row in configs.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    shares = configs.get("tp-split", {}).get("tp_nvlink_share")
    if shares:
        lines.append(f"\ntp-split NVLink share per TP AllReduce (8 KiB, 256 KiB, ...): {' '.join(map(str, shares))}")
    lines += [f"{k}: {v}" for k, v in verdicts(configs).items()]
    return "\n".join(lines)


def verdicts(configs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The comparisons the scenario is for (None where a run is missing)."""
    def get(name: str, key: str) -> Any:
        return configs.get(name, {}).get(key)

    out: dict[str, Any] = {}
    pxn, stock = get("ep-spread-pxn", "spine_bytes"), get("ep-spread", "spine_bytes")
    if pxn is not None and stock:
        out["pxn spine bytes / stock"] = round(pxn / stock, 3)
    split = get("tp-split", "busbw_mbps")
    alone = [b for b in (get("tp-nvlink", "busbw_mbps"), get("tp-roce", "busbw_mbps")) if b]
    if split and alone:
        out["tp-split busbw / max(nvlink, roce)"] = round(split / max(alone), 3)
    gor, spread = get("ep-spread-gor", "busbw_mbps"), get("ep-spread", "busbw_mbps")
    if gor and spread:
        out["ep-spread GOR busbw / without"] = round(gor / spread, 3)
    return out


MEDIAN_KEYS = ("busbw_mbps", "nic_pauses", "nic_paused_s", "wrong", *(f"{c}_bytes" for c in CHANNELS))


def run_moe(settings: Settings, runs: Sequence[MoeRun] = tuple(RUNS.values())) -> dict[str, Any]:
    """The scenario's runs, ``repeats`` times on one fabric; summary.json and the table."""
    trace = settings.trace if settings.trace != Settings.trace else MOE_TRACE
    exp = prepare(dataclasses.replace(settings, trace=trace, configs=(CONFIGS["rail"],)))
    tp_file = prepare_trace(TP_TRACE, exp.out / "tp-trace.yaml", settings.iterations, settings.size_scale,
                            settings.fabric)
    bases = {"moe": exp.trace, "tp": load_trace(tp_file)}
    jobs: dict[str, tuple[Job, Trace]] = {}
    for run in runs:
        t = run_trace(bases[run.trace], run)
        path = exp.out / f"trace-{run.name}.yaml"
        path.write_text(yaml.safe_dump(trace_document(t), sort_keys=False), encoding="utf-8")
        jobs[run.name] = (run_job(exp.spec_file, path, run, settings.seed), t)
    extra: dict[str, dict[str, list]] = {}
    with running_fabric(exp, exp.spec, exp.out / "fabric") as (fabric, recorder):
        for rep in range(settings.repeats):
            for run in runs:
                job, t = jobs[run.name]
                run_dir = exp.out / run.name / f"rep{rep + 1}"
                recorded = record_run(exp, fabric, recorder, run.gor, run_dir,
                                      lambda: run_on_fabric(fabric, job, run_dir, settings.timeout_s))
                numbers = recorded.numbers(bus_bits(t, job) / (exp.bottleneck_mbps * 1e6), compute_seconds(t))
                mine = run_numbers(recorded.results, numbers, t, job)
                exp.repeats.setdefault(run.name, []).append(numbers)
                for key, value in mine.items():
                    extra.setdefault(run.name, {}).setdefault(key, []).append(value)
                exp.log(f"repeat {rep + 1}/{settings.repeats} {run.name:14s} iteration "
                        f"{numbers['iteration_s']:.3f} s, busbw {mine['busbw_mbps']} Mbit/s, "
                        f"wrong {mine['wrong']}, GOR moves {numbers['gor_moves']}\n"
                        f"    {traffic_line(numbers['traffic'])}")
    for name in exp.repeats:
        exp.models.setdefault(name, {})
    configs = {name: {k: (median_of(v) if k in MEDIAN_KEYS else v[len(v) // 2]) for k, v in numbers.items()}
               for name, numbers in extra.items()}
    return write_summary(exp, {"scenario": "moe", "configs": configs, "verdicts": verdicts(configs)},
                         table=format_moe_table)
