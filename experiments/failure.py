"""The failure scenario: a leaf-spine cable fails mid-job and comes back ``down_s``
later, with GOR (it repairs the routes: the leaf's ECMP group drops the spine, flows
rehash onto the spines left) and without it (nothing reroutes: the flows hashed onto
the dead cable stall until it is back, go-back-N resends what was lost).

The cable is the leaf-spine cable the job's flows use most (hash model); it fails
``fail_after_s`` after every agent of the job is up (its start-barrier marker is
written), so that a machine slow to start Python processes still fails the cable
mid-job, with a baseline recorded before it. Per run:

* ``impact_s``: the slowest iteration minus the median iteration of the same job --
  what the failure cost the training step it hit;
* ``recovery_s``: from the failure to the end of the last telemetry interval (until
  the cable is back plus ``SETTLE_S``, and before the job's last busy interval) in
  which hosts received less than ``STALL_FRACTION`` of their pre-failure median rate --
  how long traffic stalled (0: no stalled interval at the telemetry's resolution);
* ``repair_s``: from the failure to GOR's ``repaired`` event (None without GOR).
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from experiments import collisions
from experiments.configs import CONFIGS
from experiments.metrics import median_of
from experiments.recorder import Interval, Recorder
from experiments.runner import Experiment, Settings, prepare, run_once, write_summary
from scale.flows import step_flows
from tccl import collectives as C
from tccl.agent import port_function, ready_path
from tccl.job import Job
from topo.addressing import AddressPlan

FAIL_AFTER_S = 3.0       # after the agents are up: a baseline of several telemetry rounds
AGENTS_UP_TIMEOUT_S = 60.0  # launch -> every agent up, on a loaded machine
DOWN_S = 3.0             # how long the cable stays down
SETTLE_S = 2.0           # after the cable is back, stalls still count this long
STALL_FRACTION = 0.25    # an interval below this share of the baseline rate is a stall
ITERATIONS = 8           # so that the job outlives the failure


def busiest_cable(exp: Experiment, config: str = "orthogonal") -> tuple[str, str]:
    """(leaf, spine) of the leaf->spine link most of the job's steps put flows on."""
    plan = AddressPlan(exp.spec)
    job = exp.jobs[config]
    port, _ = port_function(job, C.ring_order(job.ranks, job.workload.order), exp.trace)
    use: Counter = Counter()
    leaves, spines = {l.name for l in plan.leaves}, {s.name for s in plan.spines}
    for flows in step_flows(job, exp.trace):
        loads = collisions.link_loads(plan, job, flows, port)
        use.update({link: 1 for link in loads if link[0] in leaves and link[1] in spines})
    if not use:
        raise ValueError("the job sends nothing through a spine: no cable to fail")
    return min(use, key=lambda link: (-use[link], link))


def delivered_rate(intervals: Mapping[str, Sequence[Interval]], hosts: set[str]) -> list[tuple[float, float]]:
    """(interval end, bytes/s delivered to all hosts), in time order."""
    per_t: dict[float, float] = {}
    for link, series in intervals.items():
        if link.split("->")[1] in hosts:
            for iv in series:
                per_t[iv.t] = per_t.get(iv.t, 0.0) + iv.bytes / iv.seconds
    return sorted(per_t.items())


def recovery_seconds(rate: Sequence[tuple[float, float]], t_fail: float, t_back: float,
                     settle_s: float = SETTLE_S, stall: float = STALL_FRACTION) -> float:
    """See the module doc; raises ValueError without a baseline before the failure."""
    before = [r for t, r in rate if t <= t_fail and r > 0]
    if not before:
        raise ValueError("no traffic before the failure: no baseline rate to recover to")
    threshold = stall * statistics.median(before)
    # Quiet rounds after the last busy one are the job's end, not a stall: a job that
    # rode out the failure may finish inside the settling window. A job that never got
    # busy again after the failure stalled to the end of the window.
    last_busy = max(t for t, r in rate if r >= threshold)
    end = min(t_back + settle_s, last_busy) if last_busy > t_fail else t_back + settle_s
    stalled = [t for t, r in rate if t_fail < t <= end and r < threshold]
    return max(0.0, max(stalled) - t_fail) if stalled else 0.0


class CableFailure:
    """Takes a cable down ``after_s`` after `start` and ``agents_up()`` (default: at
    once), and up again ``down_s`` later, on a thread; records both times (the fabric's
    emulated seconds)."""

    def __init__(self, fabric: Any, cable: tuple[str, str], after_s: float, down_s: float,
                 agents_up: Callable[[], bool] = lambda: True) -> None:
        self.fabric, self.cable, self.after_s, self.down_s = fabric, cable, after_s, down_s
        self.agents_up = agents_up
        self.t_down: float | None = None
        self.t_up: float | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()

    def start(self, t0: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(t0,), name="cable-failure", daemon=True)
        self._thread.start()

    def _run(self, t0: float) -> None:
        clock = self.fabric.clock
        while not self.agents_up():
            if clock.now() - t0 > AGENTS_UP_TIMEOUT_S or clock.wait(self._cancel, 0.05):
                return
        if clock.wait(self._cancel, self.after_s):
            return
        self.t_down = clock.now()
        self.fabric.net.configLinkStatus(*self.cable, "down")
        clock.wait(self._cancel, self.down_s)
        self.fabric.net.configLinkStatus(*self.cable, "up")
        self.t_up = clock.now()

    def finish(self) -> None:
        """Wait for the cable to be back (ending the wait early if the job is over)."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(self.down_s + 10)


def failure_numbers(numbers: Mapping[str, Any], failure: CableFailure, hosts: set[str],
                    events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """impact_s, recovery_s and repair_s of one run (module doc)."""
    if failure.t_down is None or failure.t_up is None:
        raise ValueError(f"the job ended before the cable failed ({FAIL_AFTER_S} s after the agents were up): "
                         f"use more iterations")
    its = numbers["iterations_s"]
    repaired = [e["t"] for e in events if e.get("event") == "repaired" and e["t"] >= failure.t_down]
    return {"impact_s": round(max(its) - statistics.median(its), 4),
            "recovery_s": round(recovery_seconds(delivered_rate(numbers["intervals"], hosts),
                                                 failure.t_down, failure.t_up), 3),
            "repair_s": round(min(repaired) - failure.t_down, 3) if repaired else None,
            "max_iteration_s": max(its)}


def format_failure_table(configs: Mapping[str, Mapping[str, Any]]) -> str:
    head = ["config", "iter s", "max iter s", "impact s", "recovery s", "repair s", "drops", "GOR moves"]
    rows = [head]
    for name, r in configs.items():
        cell = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        rows.append([name, cell(r.get("iteration_s"), ".3f"), cell(r.get("max_iteration_s"), ".3f"),
                     cell(r.get("impact_s"), ".3f"), cell(r.get("recovery_s"), ".2f"),
                     cell(r.get("repair_s"), ".2f"), str(r.get("drops")), str(r.get("gor_moves"))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_failure(settings: Settings, fail_after_s: float = FAIL_AFTER_S, down_s: float = DOWN_S) -> dict[str, Any]:
    """The scenario without and with GOR (orthogonal ports in both), ``repeats`` times."""
    from controller.events import read_events
    from controller.routes import program_fabric
    from topo.net import Fabric

    settings = dataclasses.replace(settings, configs=(CONFIGS["orthogonal"], CONFIGS["gor"]),
                                   iterations=settings.iterations or ITERATIONS)
    exp = prepare(settings)
    cable = busiest_cable(exp)
    exp.log(f"failure scenario: cable {exp.name(cable[0])}-{exp.name(cable[1])} down "
            f"{fail_after_s:g} s after the agents are up, for {down_s:g} s")
    hosts = {exp.name(s.name) for s in AddressPlan(exp.spec).servers}
    per_run: dict[str, list[dict[str, Any]]] = {}
    with Fabric(exp.spec, run_dir=exp.out / "fabric", program=program_fabric) as fabric:
        recorder = Recorder(fabric.plan, settings.interval_s, fabric.clock).start()
        try:
            for rep in range(settings.repeats):
                for config in settings.configs:
                    run_dir = exp.out / config.name / f"rep{rep + 1}"
                    failure = CableFailure(fabric, cable, fail_after_s, down_s,
                                           _agents_up(run_dir, exp.jobs[config.name]))
                    try:
                        numbers = run_once(exp, fabric, recorder, config, run_dir, on_start=failure.start)
                    finally:
                        failure.finish()
                    events = read_events(run_dir / "gor-events.jsonl") if config.gor else []
                    extra = failure_numbers(numbers, failure, hosts, events)
                    numbers.update(extra)
                    exp.repeats.setdefault(config.name, []).append(numbers)
                    per_run.setdefault(config.name, []).append(extra)
                    exp.log(f"repeat {rep + 1}/{settings.repeats} {config.name:10s} impact "
                            f"{extra['impact_s']:.2f} s, recovery {extra['recovery_s']:.2f} s, "
                            f"repair {extra['repair_s']}")
        finally:
            recorder.stop()
    medians = {name: {k: median_of([r[k] for r in runs]) for k in ("impact_s", "recovery_s", "repair_s",
                                                                 "max_iteration_s")}
               for name, runs in per_run.items()}
    return write_summary(exp, {"scenario": "failure", "cable": [exp.name(c) for c in cable],
                               "fail_after_s": fail_after_s, "down_s": down_s, "configs": medians},
                         table=format_failure_table)


def _agents_up(run_dir: Path, job: Job) -> Callable[[], bool]:
    """True once every server's agent has written its start-barrier marker."""
    markers = [ready_path(run_dir, s) for s in {r.server for r in job.ranks}]
    return lambda: all(m.exists() for m in markers)
