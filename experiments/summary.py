"""From what one run of a configuration recorded to its numbers, and from repeats to
the configuration's row of ``summary.json`` (pure functions: unit-tested).

A repeat's inputs: the agents' results (``iteration_s`` per server, flow records with
``cnps`` and ``ce_marked_rx``), the links' recorded intervals during the job, and GOR's
events (none without GOR). Utilisation is measured on the leaf-spine links -- where
ECMP decides -- over the job's active window: the intervals in which any host received
traffic (agent start-up and the agents' final linger are left out).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

from controller.events import move_latencies
from experiments.metrics import MetricsError, busbw_frac, job_iterations, median_of, spread
from experiments.recorder import Interval
from tccl.traffic import merged

# The numbers every configuration has in summary.json (the list), then extras.
REQUIRED = ("iteration_s", "busbw_frac", "max_link_util", "mean_link_util", "ecn_marks", "cnps",
            "drops", "gor_moves")


def is_fabric_link(link: str, leaves: set[str], spines: set[str]) -> bool:
    a, b = link.split("->")
    return (a in leaves and b in spines) or (a in spines and b in leaves)


def active_window(intervals: Mapping[str, Sequence[Interval]], hosts: set[str]) -> tuple[float, float] | None:
    """(first, last) interval end time in which a leaf delivered bytes to a host."""
    ends = [iv.t for link, series in intervals.items() if link.split("->")[1] in hosts
            for iv in series if iv.bytes > 0]
    return (min(ends), max(ends)) if ends else None


def link_numbers(intervals: Mapping[str, Sequence[Interval]], leaves: set[str], spines: set[str],
                 hosts: set[str]) -> dict[str, Any]:
    """max/mean utilisation of every leaf-spine link over the active window, the
    largest and the average of them, and tail drops on every link."""
    drops = sum(iv.drops for series in intervals.values() for iv in series)
    span = active_window(intervals, hosts)
    per_link: dict[str, dict[str, float]] = {}
    if span is not None:
        for link, series in sorted(intervals.items()):
            if not is_fabric_link(link, leaves, spines):
                continue
            active = [iv for iv in series if span[0] <= iv.t <= span[1]]
            seconds = sum(iv.seconds for iv in active)
            if not active or seconds <= 0:
                continue
            mean = sum(iv.util * iv.seconds for iv in active) / seconds
            per_link[link] = {"max_util": round(max(iv.util for iv in active), 4), "mean_util": round(mean, 4)}
    return {"max_link_util": max((v["max_util"] for v in per_link.values()), default=0.0),
            "mean_link_util": (round(statistics.fmean(v["mean_util"] for v in per_link.values()), 4)
                               if per_link else 0.0),
            "drops": drops, "links": per_link,
            "active_s": round(span[1] - span[0], 3) if span else 0.0}


def repeat_numbers(results: Mapping[str, Mapping[str, Any]], ideal_comm_s: float, compute_s: float,
                   links: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One repeat of one configuration: the numbers of its row (see the module doc)."""
    missing = [s for s, r in results.items() if "iteration_s" not in r]
    if missing:
        raise MetricsError(f"agents {', '.join(missing)} report no iteration_s (not a trace job?)")
    iterations = job_iterations({s: r["iteration_s"] for s, r in results.items()})
    iteration_s = statistics.median(iterations)
    flows = [f for r in results.values() for f in r.get("flows", [])]
    events = list(events)
    latencies = move_latencies(events)
    verified = move_latencies(events, "verified")
    per_iteration = [busbw_frac(ideal_comm_s, it, compute_s) for it in iterations]
    return {
        "iteration_s": iteration_s,
        "iterations_s": iterations,
        "busbw_frac": busbw_frac(ideal_comm_s, iteration_s, compute_s),
        # Per iteration, and over iterations 2..N (their median iteration): a move made
        # in iteration 1 holds for the rest of the job (its QPs live as long).
        "busbw_per_iteration": [round(b, 4) for b in per_iteration],
        "busbw_frac_rest": (busbw_frac(ideal_comm_s, statistics.median(iterations[1:]), compute_s)
                            if len(iterations) > 1 else None),
        "max_link_util": links["max_link_util"],
        "mean_link_util": links["mean_link_util"],
        "ecn_marks": sum(int(f.get("ce_marked_rx", 0)) for f in flows),
        "cnps": sum(int(f.get("cnps", 0)) for f in flows),
        "drops": int(links["drops"]),
        "retransmits": sum(int(f.get("retransmits", 0)) for f in flows),
        "gor_moves": sum(1 for e in events if e.get("event") == "moved"),
        # Of those, the moves of plans made as the agents first listed the QPs (no
        # alarm: not in the detect -> moved figures).
        "gor_planned_moves": sum(1 for e in events if e.get("event") == "moved" and "planned_s" in e),
        "gor_loops": sum(1 for e in events if e.get("event") == "detect"),
        "gor_loop_s": statistics.median(latencies) if latencies else None,
        "gor_loop_s_p99": percentile(latencies, 0.99),
        "gor_move_latencies_s": latencies,
        # Detect -> the data plane's first sample of the flow on its new path.
        "gor_verified_s": statistics.median(verified) if verified else None,
        "gor_verified_s_p99": percentile(verified, 0.99),
        "gor_verify_latencies_s": verified,
        # Detect -> moved dated from the alarm's last level change, not its episode.
        "gor_from_alarm_latencies_s": [float(e["from_alarm_s"]) for e in events
                                       if e.get("event") == "moved" and "from_alarm_s" in e],
        "links": links["links"],
        # Where the bytes went: per (op, group) and per channel, every agent's summed.
        "traffic": merged(r["traffic"] for r in results.values() if "traffic" in r),
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (nearest rank, so it is a measured value);
    None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def config_row(repeats: Sequence[Mapping[str, Any]], model: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A configuration's row: the median of every number over its repeats, the spread
    of iteration time and busbw, per-link utilisation of the median-iteration repeat,
    the hash model's figures (``model``: collisions, model_busbw_frac, ...) and the raw
    repeats."""
    if not repeats:
        raise MetricsError("a configuration needs at least one repeat")
    row: dict[str, Any] = {}
    for key in (*REQUIRED, "retransmits", "gor_loops", "gor_planned_moves", "busbw_frac_rest"):
        row[key] = median_of([r.get(key) for r in repeats])
    # GOR's detect -> moved over every move of every repeat (a repeat has a handful).
    for key, of in (("gor_loop_s", "gor_move_latencies_s"), ("gor_verified_s", "gor_verify_latencies_s"),
                    ("gor_loop_from_alarm_s", "gor_from_alarm_latencies_s")):
        pooled = sorted(x for r in repeats for x in r.get(of, []))
        row[key] = statistics.median(pooled) if pooled else None
        row[f"{key}_p99"] = percentile(pooled, 0.99)
    row["iteration_s_spread"] = spread(r["iteration_s"] for r in repeats).as_dict()
    row["busbw_frac_spread"] = spread(r["busbw_frac"] for r in repeats).as_dict()
    middle = sorted(repeats, key=lambda r: r["iteration_s"])[(len(repeats) - 1) // 2]
    row["links"] = middle["links"]
    row["traffic"] = middle.get("traffic")
    row["repeats"] = [{k: v for k, v in r.items() if k != "links"} for r in repeats]
    row["fidelity"] = fidelity_row([r["fidelity"] for r in repeats if "fidelity" in r])
    row.update(model or {})
    return row


def fidelity_row(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A configuration's fidelity over its repeats: faithful only if every repeat was,
    with the worst p99 lateness and on-time share, the kernel drops summed, and the
    most the hypervisor stole from the machine during an unfaithful one (None: none
    was, or none counted it; emulation/host.py), and the most dilation a repeat's
    lateness needs (`emulation.fidelity.Fidelity.dilation_needed`)."""
    if not runs:
        return None
    steals = [r["host_steal_frac"] for r in runs if not r["faithful"] and r.get("host_steal_frac") is not None]
    return {"faithful": all(r["faithful"] for r in runs),
            "unfaithful_repeats": sum(not r["faithful"] for r in runs), "repeats": len(runs),
            "p99_lateness_pkt": max(r["p99_lateness_pkt"] for r in runs),
            "on_time_frac": min(r["on_time_frac"] for r in runs),
            "kernel_drops": sum(r["kernel_drops"] for r in runs),
            "dilation": max(r["dilation"] for r in runs),
            "dilation_needed": max(r.get("dilation_needed", r["dilation"]) for r in runs),
            "unfaithful_host_steal": max(steals) if steals else None,
            "problems": sorted({p for r in runs for p in r["problems"]})}
