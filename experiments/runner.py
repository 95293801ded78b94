"""The experiment runner: one fabric, the same trace-driven job under each configuration,
repeated; the numbers, ``summary.json``, the comparison table and the plots.

One fabric serves every configuration (bring-up is the slow part): between runs
nothing carries over that a number depends on -- every run has fresh agent processes
in a run directory of its own, GOR (when on) is a new controller with its own event
log, link numbers are counter differences over the run's own time window, and the
queues have drained while the agents lingered. Configurations take turns within each
repeat, so a drift in the machine's load spreads over all of them.

The fabric runs under a node prefix and gRPC ports of its own (so it never collides
with ``make run`` or a test); names in the outputs are the spec's, without the prefix.

With ``pcap`` on, every run gets a fabric of its own with captures, and keeps them in
its run directory (`experiments.captures` says why); each run directory then holds
what ``python -m insight`` reads: ``fabric.yaml``, ``pcap/``, the agents' results and
``telemetry.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from controller.events import read_events
from emulation.fidelity import Fidelity, switches_window
from experiments import collisions
from experiments.captures import keep_captures
from experiments.configs import CONFIGS, Config, build_job, nvlink_gbps, prepare_trace
from experiments.metrics import compute_seconds, step_costs
from experiments.recorder import Interval, Recorder
from experiments.summary import config_row, link_numbers, repeat_numbers
from experiments.table import format_table
from tccl.fidelity import agents_window
from tccl.job import Job
from tccl.launch import run_on_fabric
from tccl.traffic import traffic_line
from tccl.trace import Trace, load_trace
from topo.addressing import AddressPlan
from topo.freeports import free_port_base
from topo.spec import FabricSpec, load_spec, replace

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
DEFAULT_FABRIC = ROOT / "topo" / "fabrics" / "default.yaml"
DEFAULT_TRACE = ROOT / "traces" / "dp_tp_pp.yaml"
SUMMARY = "summary.json"
EVENTS = "gor-events.jsonl"
TELEMETRY = "telemetry.jsonl"
# Iterations of the demo's job (python -m experiments): GOR's moves land in the first
# one or two, and a job of 8 shows what they hold for the rest (the QPs live for the
# whole job).
DEMO_ITERATIONS = 8
# Sampling of the demo's fabric (1 in N frames leaving by a fabric link): GOR verifies a
# move by a sample of the flow's new 5-tuple on its new path, and at RoCE MTU 4096 a
# QP at half a 10 Mbit/s NIC sends ~150 frames/s, only while its collective step runs.
# At 1 in 64 (the fabric file's rate) that left GOR's detect -> moved at p50 1.7 s,
# p99 2.9 s; at 1 in 16, p50 0.6 s, p99 1.7 s, with `gor` and `orthogonal` at the same
# busbw (docs/gor.md). Every configuration runs on the same sampling. `make demo`
# (python -m experiments) uses it; a `Settings` made in code keeps the spec's rate.
DEMO_SAMPLE_RATE = 16


@dataclass(frozen=True)
class Settings:
    """What to run (the command line's options)."""

    fabric: Path = DEFAULT_FABRIC
    trace: Path = DEFAULT_TRACE
    seed: int = 1
    repeats: int = 3
    configs: tuple[Config, ...] = tuple(CONFIGS.values())
    out: Path | None = None               # default: results/<date-time>
    iterations: int | None = None         # override the trace's iteration count
    size_scale: float = 1.0               # scale the trace's message sizes (short runs)
    interval_s: float = 0.25              # link telemetry period
    timeout_s: float = 300.0              # one job, all agents
    pcap: bool = False                    # captures: a fabric per run (experiments.captures)
    sample_rate: int | None = None        # the fabric's 1-in-N sampling (None: the spec's)

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if not self.configs:
            raise ValueError("at least one configuration is needed")


@dataclass
class Experiment:
    """A prepared experiment: the run directory, the job per configuration, what the
    hash model predicts for each, and the line-rate cost of the trace."""

    settings: Settings
    out: Path
    spec: FabricSpec                      # the running fabric's (with prefix and ports)
    spec_file: Path
    trace: Trace
    jobs: dict[str, Job]
    models: dict[str, dict[str, Any]]
    ideal_comm_s: float
    compute_s: float
    bottleneck_mbps: float
    log: Callable[[str], None] = print
    repeats: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The machine's 1-minute load average when the run started: the switches, agents
    # and GOR share its cores, so numbers from a busy machine are lower.
    load_start: float = field(default_factory=lambda: os.getloadavg()[0])

    def name(self, node: str) -> str:
        """A node or link name without the running fabric's prefix."""
        p = self.spec.node_prefix
        return "->".join(n[len(p):] if p and n.startswith(p) else n for n in node.split("->"))


def write_spec(spec: FabricSpec, path: Path) -> Path:
    """Save ``spec`` as YAML at ``path`` (a file `topo.spec.load_spec` reads back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dataclasses.asdict(spec), sort_keys=False), encoding="utf-8")
    return path


def prepare(settings: Settings, log: Callable[[str], None] = print) -> Experiment:
    """Everything that needs no fabric: run directory, spec copies, trace copy, jobs,
    the hash model's predictions."""
    out = Path(settings.out or RESULTS / time.strftime("%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    base = load_spec(settings.fabric)
    if settings.sample_rate is not None:
        base = replace(base, sample_rate=settings.sample_rate)
    # The logical fabric, for `python -m insight` on the run directory.
    write_spec(dataclasses.replace(base, pcap=False), out / "fabric.yaml")
    spec = replace(base, node_prefix=f"x{os.getpid() % 1000}", pcap=False,
                   grpc_port_base=free_port_base(len(AddressPlan(base).switches)))
    spec_file = write_spec(spec, out / "fabric" / "spec.yaml")
    trace_file = prepare_trace(settings.trace, out / "trace.yaml", settings.iterations, settings.size_scale,
                               settings.fabric, log)
    trace = load_trace(trace_file)
    plan = AddressPlan(spec)
    jobs = {c.name: build_job(spec_file, trace_file, c, settings.seed) for c in settings.configs}
    models = {}
    # The configurations' jobs differ in their ports, which the random draws replace:
    # one mean per distinct rest of the job (100 model runs each) serves them all.
    random_means: dict[Job, float] = {}
    for c in settings.configs:
        m = collisions.analyse(plan, jobs[c.name], trace, c.gor)
        key = collisions.random_draws_key(jobs[c.name])
        if key not in random_means:
            random_means[key] = collisions.expected_random(plan, jobs[c.name], trace)
        m["collisions_expected_random"] = random_means[key]
        models[c.name] = m
    bottleneck = min(spec.links.host_mbps, spec.links.uplink_mbps)
    any_job = next(iter(jobs.values()))
    costs = step_costs(trace, any_job.ranks, bottleneck * 1e6, nvlink_gbps(spec) * 1e9)
    return Experiment(settings, out, spec, spec_file, trace, jobs, models,
                      sum(c.ideal_s for c in costs), compute_seconds(trace), bottleneck, log)


def run_once(exp: Experiment, fabric: Any, recorder: Recorder, config: Config, run_dir: Path,
             on_start: Callable[[float], Any] | None = None,
             on_end: Callable[[], Any] | None = None) -> dict[str, Any]:
    """One job under one configuration on the running fabric; its numbers (plus, under
    ``series`` and ``intervals``, the recorded telemetry of the run). ``on_start(t)``
    is called as the agents are launched (emulated time ``t``) and ``on_end()`` once
    they have ended, GOR still running: the failure scenario starts its cable failure
    at the one and waits at the other until the cable is back and GOR has logged it, so
    a job that outlives its fault by little still shows GOR the whole fault. ``fidelity`` holds how
    faithful the emulation was over the job (switches' departures against the ideal
    links, the agents' departures against their pacers and their handling of frames
    after arrival, kernel drops)."""

    def launch() -> dict[str, dict[str, Any]]:
        results = run_on_fabric(fabric, exp.jobs[config.name], run_dir, exp.settings.timeout_s)
        if on_end is not None:
            on_end()
        return results

    run = record_run(exp, fabric, recorder, config.gor, run_dir, launch, on_start)
    return run.numbers(exp.ideal_comm_s, exp.compute_s)


@dataclass
class RecordedRun:
    """What one run on the fabric recorded: the agents' results by server, the links'
    numbers and intervals, GOR's events, the emulation's fidelity, start and end."""

    results: dict[str, dict[str, Any]]
    links: dict[str, Any]
    intervals: dict[str, list[Interval]]
    events: list[dict[str, Any]]
    fidelity: Fidelity
    start: float
    end: float
    series: dict[str, Any]

    def numbers(self, ideal_comm_s: float, compute_s: float, servers: set[str] | None = None) -> dict[str, Any]:
        """The run's numbers for the job of ``servers`` (default: every agent's)."""
        results = {s: r for s, r in self.results.items() if servers is None or s in servers}
        numbers = repeat_numbers(results, ideal_comm_s, compute_s, self.links, self.events)
        numbers["job_s"] = round(self.end - self.start, 3)
        numbers["fidelity"] = self.fidelity.to_json()
        numbers["series"] = self.series
        numbers["intervals"] = self.intervals
        return numbers


def record_run(exp: Experiment, fabric: Any, recorder: Recorder, with_gor: bool, run_dir: Path,
               launch: Callable[[], dict[str, dict[str, Any]]],
               on_start: Callable[[float], Any] | None = None) -> RecordedRun:
    """Run ``launch`` (the agents of one or more jobs in ``run_dir``; their results by
    server) on the running fabric, with a GOR of its own if ``with_gor``, and record
    the links, GOR's events and the fidelity over it."""
    from controller.config import default_config
    from controller.gor import Gor

    run_dir.mkdir(parents=True, exist_ok=True)
    # The logical fabric beside the run's files: `python -m insight RUN_DIR` reads it.
    shutil.copyfile(exp.out / "fabric.yaml", run_dir / "fabric.yaml")
    gor = None
    if with_gor:
        # The agents run in run_dir: GOR must find their control sockets there, and
        # publish its topology where they read it.
        gor = Gor(fabric.plan, fabric.pipeline, run_dir, default_config(fabric.plan),
                  fabric=fabric, agent_dir=run_dir).start()
    clock = fabric.clock
    try:
        before = recorder.fidelity()
        start = clock.now()
        if on_start is not None:
            on_start(start)
        results = launch()
        end = clock.now()
        fidelity = switches_window(before, recorder.fidelity()).with_agents(
            *agents_window({s: r["fidelity"] for s, r in results.items() if "fidelity" in r}))
    finally:
        if gor is not None:
            gor.stop()
    recorder.wait_past(end)
    recording = recorder.recording
    recording.write_log(run_dir / TELEMETRY, start, end, rename=exp.name)
    intervals = {exp.name(k): v for k, v in recording.intervals(start, end).items()}
    plan = AddressPlan(load_spec(exp.out / "fabric.yaml"))
    links = link_numbers(intervals, {l.name for l in plan.leaves}, {s.name for s in plan.spines},
                         {s.name for s in plan.servers})
    events = read_events(run_dir / EVENTS) if (run_dir / EVENTS).is_file() else []
    return RecordedRun(results, links, intervals, events, fidelity,
                       start, end, _util_series(intervals, plan))


def _util_series(intervals: dict[str, list[Interval]], plan: AddressPlan) -> dict[str, Any]:
    """Leaf-spine links' utilisation per telemetry round (for the heat map)."""
    leaves, spines = {l.name for l in plan.leaves}, {s.name for s in plan.spines}
    fabric = {k: v for k, v in intervals.items()
              if (k.split("->")[0] in leaves | spines) and (k.split("->")[1] in leaves | spines)}
    times = sorted({iv.t for v in fabric.values() for iv in v})
    if not times:
        return {"t": [], "util": {}}
    index = {t: i for i, t in enumerate(times)}
    util = {}
    for link, series in sorted(fabric.items()):
        row = [0.0] * len(times)
        for iv in series:
            row[index[iv.t]] = round(iv.util, 4)
        util[link] = row
    return {"t": [round(t - times[0], 3) for t in times], "util": util}


@contextmanager
def running_fabric(exp: Experiment, spec: FabricSpec, run_dir: Path) -> Iterator[tuple[Any, Recorder]]:
    """A running fabric of ``spec`` and its telemetry recorder; both stop on leaving."""
    from controller.routes import program_fabric
    from topo.net import Fabric

    # Programmed at bring-up: the configurations without GOR need the routes too.
    with Fabric(spec, run_dir=run_dir, program=program_fabric) as fabric:
        exp.log(f"fabric {spec.name} up in {fabric.timings.get('total_s', 0):.1f} s "
                f"(prefix {spec.node_prefix}{', captures on' if spec.pcap else ''}); dilation "
                f"{fabric.clock.dilation:g}: every figure below is in emulated time")
        recorder = Recorder(fabric.plan, exp.settings.interval_s, fabric.clock).start()
        try:
            yield fabric, recorder
        finally:
            recorder.stop()


def _run_config(exp: Experiment, fabric: Any, recorder: Recorder, config: Config, rep: int) -> Path:
    """Repeat ``rep`` (from 0) of ``config``: its numbers into ``exp.repeats``, a line
    on the log; returns its run directory."""
    t = time.monotonic()
    run_dir = exp.out / config.name / f"rep{rep + 1}"
    numbers = run_once(exp, fabric, recorder, config, run_dir)
    exp.repeats.setdefault(config.name, []).append(numbers)
    exp.log(f"repeat {rep + 1}/{exp.settings.repeats} {config.name:10s} iteration "
            f"{numbers['iteration_s']:.3f} s, busbw/link {numbers['busbw_frac']:.2f}, "
            f"GOR moves {numbers['gor_moves']} ({time.monotonic() - t:.1f} s wall)\n"
            f"    {traffic_line(numbers['traffic'])}\n"
            f"    fidelity: {Fidelity.from_json(numbers['fidelity']).line()}")
    return run_dir


def run(exp: Experiment) -> dict[str, Any]:
    """Bring the fabric up (with captures: once per run), run every configuration
    ``repeats`` times, write ``summary.json`` and the plots; returns the summary."""
    s = exp.settings
    if s.pcap:
        spec = dataclasses.replace(exp.spec, pcap=True)
        for rep in range(s.repeats):
            for config in s.configs:
                fabric_dir = exp.out / config.name / f"rep{rep + 1}" / "fabric"
                with running_fabric(exp, spec, fabric_dir) as (fabric, recorder):
                    run_dir = _run_config(exp, fabric, recorder, config, rep)
                kept = keep_captures(fabric_dir / "pcap", run_dir / "pcap", spec.node_prefix)
                exp.log(f"kept {len(kept)} captures in {run_dir / 'pcap'}")
    else:
        with running_fabric(exp, exp.spec, exp.out / "fabric") as (fabric, recorder):
            for rep in range(s.repeats):
                for config in s.configs:
                    _run_config(exp, fabric, recorder, config, rep)
    return write_summary(exp)


def write_summary(exp: Experiment, extra: dict[str, Any] | None = None,
                  table: Callable[[dict[str, Any]], str] = format_table) -> dict[str, Any]:
    """summary.json (with ``extra`` keys and per-configuration numbers merged in), the
    table on the log, the plots."""
    s = exp.settings
    configs = {name: config_row([{k: v for k, v in r.items() if k not in ("series", "intervals")}
                                 for r in reps], exp.models[name])
               for name, reps in exp.repeats.items()}
    summary = {
        "run": exp.out.name, "fabric": str(s.fabric), "trace": str(s.trace), "trace_name": exp.trace.name,
        "iterations": exp.trace.iterations, "seed": s.seed, "repeats": s.repeats,
        "bottleneck_mbps": exp.bottleneck_mbps, "ideal_comm_s": exp.ideal_comm_s,
        "compute_s": exp.compute_s, "cpus": os.cpu_count(),
        "load_avg": {"start": round(exp.load_start, 2), "end": round(os.getloadavg()[0], 2)},
        "configs": configs,
    }
    for key, value in (extra or {}).items():
        if key == "configs":
            for name, numbers in value.items():
                configs[name].update(numbers)
        else:
            summary[key] = value
    (exp.out / SUMMARY).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    exp.log(f"\n{exp.trace.name}, {s.repeats} repeat(s), seed {s.seed}; machine load "
            f"{exp.load_start:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n" + table(configs))
    for path in render_plots(exp, configs):
        exp.log(f"wrote {path}")
    exp.log(f"wrote {exp.out / SUMMARY}")
    return summary


def render_plots(exp: Experiment, configs: dict[str, dict[str, Any]]) -> list[Path]:
    """insight's busbw bars, and a link-utilisation heat map per configuration (its
    median-iteration repeat), drawn by insight from the recorded telemetry."""
    from insight.plots import PlotError, busbw_bars, link_heatmap

    plots = exp.out / "plots"
    written = [busbw_bars(configs, plots / "busbw.png")]
    for name, reps in exp.repeats.items():
        middle = sorted(reps, key=lambda r: r["iteration_s"])[(len(reps) - 1) // 2]
        try:
            written.append(link_heatmap(heatmap_input(middle["series"], exp), plots / f"link_util_{name}.png"))
        except PlotError as e:
            exp.log(f"link_util_{name}.png skipped: {e}")
    return written


def heatmap_input(series: dict[str, Any], exp: Experiment) -> dict[str, Any]:
    """The recorded utilisation in the shape `insight.plots.link_heatmap` draws
    (bytes per bin of the telemetry period, per link)."""
    bin_s = exp.settings.interval_s
    per_link = {}
    for link, utils in series["util"].items():
        mbps = exp.spec.links.uplink_mbps
        per_link[link] = {"mbps": mbps, "packets": int(any(utils)),
                          "bytes_per_bin": [round(u * mbps * 1e6 / 8 * bin_s) for u in utils]}
    return {"links": {"per_link": per_link, "bins": len(series["t"])}, "bin_s": bin_s,
            "fabric": exp.spec.name}
