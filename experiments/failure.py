"""The failure scenario: something on the job's way fails mid-job and comes back
``down_s`` later, with GOR (it repairs the routes: the ECMP groups drop what failed,
flows rehash onto what is left) and without it (nothing reroutes: the flows hashed onto
it stall until it is back, go-back-N resends what was lost). Three kinds
(`FAILURE_KINDS`), each on its own fabric (`run_failures`, what ``make demo
SCENARIO=failure`` runs):

* ``cable``: the leaf-spine cable the job's flows use most (hash model);
* ``switch``: the spine at the end of that cable, killed (SIGKILL) and restarted; GOR
  sees its P4Runtime stream break and routes around it, then re-pushes it; without GOR
  the restarted switch is programmed again by the fabric's own provisioning
  (`controller.routes.program_fabric_async`), as an operator's would;
* ``super-cable``: on the three-tier fabric, the spine-super-spine cable the job's
  flows use most: GOR learns it from the switches' port reports and regroups the
  spines (and the leaves when a plane no longer joins two pods).

The failure happens
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

import asyncio
import dataclasses
import os
import signal
import statistics
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from controller.events import read_events
from controller.switches import QUICK_FAILURE_S
from experiments import collisions
from experiments.configs import CONFIGS
from experiments.metrics import median_of
from experiments.recorder import Interval, Recorder
from experiments.runner import Experiment, Settings, prepare, run_once, write_summary
from emulation.clock import EmulationClock
from scale.flows import step_flows
from tccl import collectives as C
from tccl.agent import port_function
from tccl.rundir import ready_path
from tccl.job import Job
from topo.addressing import AddressPlan

FAIL_AFTER_S = 3.0       # after the agents are up: a baseline of several telemetry rounds
AGENTS_UP_TIMEOUT_S = 60.0  # launch -> every agent up, on a loaded machine
DOWN_S = 3.0             # how long the cable stays down
SETTLE_S = 2.0           # after the cable is back, stalls still count this long
STALL_FRACTION = 0.25    # an interval below this share of the baseline rate is a stall
ITERATIONS = 8           # so that the job outlives the failure
RESTART_TIMEOUT_S = 30.0  # a killed switch restarted -> programmed again (without GOR)
RETRY_S = 0.2            # between tries: to program a restarted switch, to find GOR's log entry
SEEN_TIMEOUT_S = 5.0     # the fault undone -> GOR has logged it (its port/stream poll is 0.25 s)
FAILURE_KINDS = ("cable", "switch", "super-cable")
# The fabric each kind runs on (None: the settings' fabric).
THREE_TIER = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "three-tier.yaml"
KIND_FABRIC = {"cable": None, "switch": None, "super-cable": THREE_TIER}
# Which tiers' links a kind's busiest link is chosen from.
KIND_TIERS = {"cable": ("leaf", "spine"), "switch": ("leaf", "spine"), "super-cable": ("spine", "superspine")}


def busiest_cable(exp: Experiment, config: str = "orthogonal",
                  tiers: tuple[str, str] = ("leaf", "spine")) -> tuple[str, str]:
    """(lower, upper) switch of the link from tier ``tiers[0]`` up to ``tiers[1]``
    (roles: leaf, spine, superspine) most of the job's steps put flows on."""
    plan = AddressPlan(exp.spec)
    job = exp.jobs[config]
    port, _ = port_function(job, C.ring_order(job.ranks, job.workload.order), exp.trace)
    use: Counter = Counter()
    lower, upper = ({sw.name for sw in plan.switches if sw.role == role} for role in tiers)
    for flows in step_flows(job, exp.trace):
        loads = collisions.link_loads(plan, job, flows, port)
        use.update({link: 1 for link in loads if link[0] in lower and link[1] in upper})
    if not use:
        raise ValueError(f"the job sends nothing from a {tiers[0]} up to a {tiers[1]}: no cable to fail")
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
    emulated seconds). `SwitchFailure` kills a switch instead."""

    UP_EVENT = "link_up"    # GOR's event for the fault undone
    # Wall seconds after `start` before the fault may come (besides ``after_s``).
    settle_wall_s = 0.0

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
        settled = t0 + self.settle_wall_s / clock.dilation
        if clock.now() < settled and clock.wait(self._cancel, settled - clock.now()):
            return
        self.t_down = clock.now()
        self.fail()
        clock.wait(self._cancel, self.down_s)
        self.restore()
        self.t_up = clock.now()

    def fail(self) -> None:
        self.fabric.net.configLinkStatus(*self.cable, "down")

    def restore(self) -> None:
        self.fabric.net.configLinkStatus(*self.cable, "up")

    def wait_over(self, gor_events: Path | None = None) -> None:
        """Wait until the fault is undone (the cable back), however long it has left, and
        then, given GOR's event log, until GOR has logged it (``UP_EVENT``) or
        ``SEEN_TIMEOUT_S`` passed: the job may end before either, and GOR stops with it."""
        clock: EmulationClock = self.fabric.clock
        if self._thread is not None:
            self._thread.join(clock.wall_s(AGENTS_UP_TIMEOUT_S + self.after_s + self.down_s) + 10)
        if gor_events is None or self.t_up is None:
            return
        end = clock.now() + SEEN_TIMEOUT_S
        while not self._gor_logged(gor_events, self.t_up) and clock.now() < end:
            clock.wait(threading.Event(), RETRY_S)

    def _gor_logged(self, gor_events: Path, since: float) -> bool:
        """Whether GOR's log has ``UP_EVENT`` at or after emulated time ``since``."""
        try:
            events = read_events(gor_events)
        except (OSError, ValueError):    # not written yet, or a line half written
            return False
        return any(e.get("event") == self.UP_EVENT and e["t"] >= since for e in events)

    def finish(self) -> None:
        """Undo the fault now if it is still on (the run failed) and wait for that."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(self.down_s + 10)


class SwitchFailure(CableFailure):
    """Kills switch ``cable[0]``'s process (SIGKILL) and restarts it ``down_s`` later,
    on the same interfaces; with ``reprogram`` (no GOR, which re-pushes it itself) the
    restarted switch is programmed as the fabric was at start.

    The scenario is a switch dying under a controller already connected to it: `start`
    comes when GOR has connected (experiments.runner.record_run), and the kill waits
    at least finsy's quick-failure window past it. finsy reconnects to a switch whose
    session failed within that window of starting only after its 10-s throttle, so an
    earlier kill showed GOR's return to the switch 10 s late (the job had ended: no
    ``switch_up``, seen in a CI run once agents started in 0.15 s)."""

    UP_EVENT = "switch_up"
    settle_wall_s = QUICK_FAILURE_S + 0.25

    def __init__(self, fabric: Any, switch: str, after_s: float, down_s: float,
                 agents_up: Callable[[], bool] = lambda: True, reprogram: bool = False) -> None:
        super().__init__(fabric, (switch,), after_s, down_s, agents_up)  # type: ignore[arg-type]
        self.reprogram = reprogram

    def fail(self) -> None:
        os.kill(self.fabric.net.get(self.cable[0]).process.pid, signal.SIGKILL)

    def restore(self) -> None:
        from controller.routes import program_fabric_async

        node = self.fabric.net.get(self.cable[0])
        node.stop(deleteIntfs=False)
        node.start([])
        type(node).batchStartup([node])
        if not self.reprogram:
            return
        clock: EmulationClock = self.fabric.clock
        end = clock.now() + RESTART_TIMEOUT_S
        while True:
            try:
                asyncio.run(asyncio.wait_for(program_fabric_async(self.fabric.plan, self.fabric.pipeline,
                                                                  [self.cable[0]]), RESTART_TIMEOUT_S))
                return
            except (RuntimeError, asyncio.TimeoutError):
                if clock.now() > end:   # still not serving P4Runtime
                    raise
                clock.wait(threading.Event(), RETRY_S)


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


def run_failures(settings: Settings, fail_after_s: float = FAIL_AFTER_S,
                 down_s: float = DOWN_S) -> dict[str, dict[str, Any]]:
    """Every kind of `FAILURE_KINDS`, each in a directory of its own under the run's
    (the three-tier one on that fabric); their summaries by kind."""
    out = Path(settings.out) if settings.out is not None else None
    return {kind: run_failure(dataclasses.replace(settings, fabric=KIND_FABRIC[kind] or settings.fabric,
                                                  out=None if out is None else out / kind),
                              fail_after_s, down_s, kind)
            for kind in FAILURE_KINDS}


def run_failure(settings: Settings, fail_after_s: float = FAIL_AFTER_S, down_s: float = DOWN_S,
                kind: str = "cable") -> dict[str, Any]:
    """The scenario (one of `FAILURE_KINDS`) without and with GOR (orthogonal ports in
    both), ``repeats`` times."""
    from controller.routes import program_fabric
    from topo.net import Fabric

    if kind not in FAILURE_KINDS:
        raise ValueError(f"failure kind {kind!r}: one of {', '.join(FAILURE_KINDS)}")
    settings = dataclasses.replace(settings, configs=(CONFIGS["orthogonal"], CONFIGS["gor"]),
                                   iterations=settings.iterations or ITERATIONS)
    exp = prepare(settings)
    cable = busiest_cable(exp, tiers=KIND_TIERS[kind])
    what = f"switch {exp.name(cable[1])} killed" if kind == "switch" else \
        f"cable {exp.name(cable[0])}-{exp.name(cable[1])} down"
    exp.log(f"failure scenario ({kind}): {what} {fail_after_s:g} s after the agents are up, for {down_s:g} s")
    hosts = {exp.name(s.name) for s in AddressPlan(exp.spec).servers}
    per_run: dict[str, list[dict[str, Any]]] = {}
    with Fabric(exp.spec, run_dir=exp.out / "fabric", program=program_fabric) as fabric:
        recorder = Recorder(fabric.plan, settings.interval_s, fabric.clock).start()
        try:
            for rep in range(settings.repeats):
                for config in settings.configs:
                    run_dir = exp.out / config.name / f"rep{rep + 1}"
                    agents_up = _agents_up(run_dir, exp.jobs[config.name])
                    failure = SwitchFailure(fabric, cable[1], fail_after_s, down_s, agents_up,
                                            reprogram=not config.gor) if kind == "switch" else \
                        CableFailure(fabric, cable, fail_after_s, down_s, agents_up)
                    try:
                        gor_log = run_dir / "gor-events.jsonl" if config.gor else None
                        numbers = run_once(exp, fabric, recorder, config, run_dir, on_start=failure.start,
                                           on_end=lambda: failure.wait_over(gor_log))
                    finally:
                        failure.finish()
                    events = read_events(gor_log) if gor_log else []
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
    target = {"switch": exp.name(cable[1])} if kind == "switch" else {"cable": [exp.name(c) for c in cable]}
    return write_summary(exp, {"scenario": "failure", "kind": kind, **target,
                               "fail_after_s": fail_after_s, "down_s": down_s, "configs": medians},
                         table=format_failure_table)


def _agents_up(run_dir: Path, job: Job) -> Callable[[], bool]:
    """True once every server's agent has written its start-barrier marker."""
    markers = [ready_path(run_dir, s) for s in {r.server for r in job.ranks}]
    return lambda: all(m.exists() for m in markers)
