"""The elephant-collision scenario GOR's detect -> moved loop is measured on (`make
bench`'s ``gor_loop_s_*``, and the GOR fabric tests).

Two TCCL flows leave the same leaf for two receivers on another leaf. Their source
ports come from the agents' own seeded port planner (``ports: random``); the seed is
chosen with the hash model so that both flows land on the spines asked for: the same
spine (a collision GOR must resolve) or different ones (a balanced run GOR must leave
alone). Senders run below the NIC rate so that the NIC links themselves never queue.

`measure_loop` runs the collision ``repeats`` times on a fabric with a GOR attached and
returns the detect -> moved loop latencies (``gor_loop_s_p50``, ``gor_loop_s_max``: to the
agent's answer that the flow sends on its new port), detect -> verified (the first
sample of it on its new path: ``gor_verified_s_p50``, ``gor_verified_s_max``) and,
over every alarm a switch raised meanwhile, first CE mark -> alarm at GOR in emulated
ms (``gor_alarm_ms_p50``, ``gor_alarm_ms_p99``: the first of the marks that reached
the level, by the switch's clock, to the PacketIn's arrival, by GOR's; one clock).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from controller.gor import Gor
from experiments.summary import percentile
from controller.paths import predict
from tccl import collectives as C
from tccl.agent import port_function
from tccl.job import Job, RankInfo, Transport, Workload
from topo.addressing import AddressPlan, Nic
from topo.hashmodel import FiveTuple

MESSAGE_BYTES = 100_000     # ~0.1 s per message at the scenario's rates: boundaries to move at
MAX_SEEDS = 5000
# Two such senders overload a 10 Mbit/s uplink (the default fabric's, the tests' small
# fabric's); one fits under the 75 % safety threshold, so GOR has a safe path to move one
# of them to. On other links it is restated as the traces are (x tccl.trace.link_scale:
# bench_gor).
SENDER_MBPS = 6.0


class ScenarioError(RuntimeError):
    """The scenario could not be set up or did not complete; says which step."""


def endpoints(plan: AddressPlan) -> tuple[Nic, Nic, Nic, Nic]:
    """Senders on the first leaf (servers 0 and 1 of block 0, rail 0) and receivers on
    the same rail of block 1."""
    if plan.spec.blocks < 2 or plan.spec.servers_per_block < 2 or plan.spec.spines < 2:
        raise ScenarioError("the collision scenario needs 2 blocks, 2 servers per block and 2 spines")
    return (plan.server_at(0, 0).nics[0], plan.server_at(0, 1).nics[0],
            plan.server_at(1, 0).nics[0], plan.server_at(1, 1).nics[0])


def two_flow_job(plan: AddressPlan, spines: tuple[int, int], iters: int, sender_mbps: float,
                 name: str, ends: tuple[Nic, Nic, Nic, Nic] | None = None,
                 superspines: tuple[int, int] | None = None) -> tuple[Job, list[int]]:
    """A sendrecv job of two concurrent flows (b0h0 -> b1h0, b0h1 -> b1h1, or
    ``ends[0]`` -> ``ends[2]`` and ``ends[1]`` -> ``ends[3]``) whose source ports hash
    onto spine numbers ``spines`` of their leaves (and, for flows across pods, onto
    super-spine numbers ``superspines`` of those spines); returns the job and the two
    ports."""
    members = endpoints(plan) if ends is None else ends
    ranks = tuple(RankInfo(i, n.server, n.block, n.rail, n.intf, n.ip, n.mac, plan.switch(n.leaf).mac)
                  for i, n in enumerate(members))
    pairs = ((0, 2), (1, 3))
    hops = 1 if superspines is None else 2
    want = [[plan.spine(plan.pod_of(members[s].block), k).name]
            + ([] if superspines is None else [plan.super_spine(k, j).name])
            for (s, _), k, j in zip(pairs, spines, superspines or (None, None))]
    for seed in range(1, MAX_SEEDS):
        job = Job(ranks, Transport(line_mbps=sender_mbps, seed=seed),
                  Workload(op="sendrecv", sizes=(MESSAGE_BYTES,), iters=iters, warmup=0, pairs=pairs),
                  name=name)
        port, _ = port_function(job, C.ring_order(job.ranks, job.workload.order))
        ports = [port(s, r) for s, r in pairs]
        got = [(predict(plan, FiveTuple(members[s].ip, members[r].ip, sport=p)) or [""] * 4)[2:2 + hops]
               for (s, r), p in zip(pairs, ports)]
        if got == want:
            return job, ports
    raise ScenarioError(f"no seed below {MAX_SEEDS} puts the two flows on {want}")


def wait_cleared(gor: Gor, known: set[int], timeout: float) -> dict[str, Any]:
    """The first `cleared` event of a loop not in ``known`` (raises on timeout)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for e in gor.events.snapshot():
            if e["event"] == "cleared" and e["loop"] not in known:
                return e
        time.sleep(0.05)
    tail = [e for e in gor.events.snapshot() if "loop" in e][-12:]
    raise ScenarioError(f"no reroute loop cleared its alarm within {timeout:.0f} s; last loop events:\n"
                        + "\n".join(map(str, tail)))


def loop_steps(gor: Gor, loop: int) -> dict[str, dict[str, Any]]:
    """The events of one loop, by name (the last of each)."""
    return {e["event"]: e for e in gor.events.snapshot() if e.get("loop") == loop}


def switch_alarm_ms(events: list[dict[str, Any]]) -> list[float]:
    """First CE mark -> alarm at GOR (emulated ms) of every level a switch's alarm
    raised or escalated in ``events``."""
    return [e["alarm_ms"] for e in events
            if e["event"] in ("alarm_raised", "alarm_escalated") and e.get("source") == "switch"]


def measure_loop(gor: Gor, repeats: int = 5, iters: int = 40, sender_mbps: float = SENDER_MBPS,
                 timeout: float = 30.0) -> dict[str, float]:
    """Run the collision ``repeats`` times (stopping each job once its loop cleared);
    detect -> moved seconds, median and max; the switches' alarm latencies. GOR's
    plans at the agents' first listing are turned off: the figure is the alarm loop's,
    and a plan would split the collision before its alarm as often as not."""
    if gor.jobs is None:
        raise ScenarioError("GOR was started without a fabric: it cannot start agents")
    gor.configure(plan=False)
    latencies, verified = [], []
    for i in range(repeats):
        known = {e["loop"] for e in gor.events.snapshot() if e["event"] == "cleared"}
        gor.jobs.start(two_flow_job(gor.plan, (0, 0), iters, sender_mbps, f"collision{i}")[0])
        try:
            cleared = wait_cleared(gor, known, timeout)
        finally:
            gor.jobs.stop_all()
            gor.jobs.jobs.clear()
        steps = loop_steps(gor, cleared["loop"])
        latencies.append(steps["moved"]["t"] - steps["detect"]["t"])
        verified.append(steps["verified"]["t"] - steps["detect"]["t"])
    alarms = switch_alarm_ms(gor.events.snapshot())
    if not alarms:
        raise ScenarioError("no switch raised an ECN alarm during the collisions")
    return {"gor_loop_s_p50": statistics.median(latencies), "gor_loop_s_max": max(latencies),
            "gor_verified_s_p50": statistics.median(verified), "gor_verified_s_max": max(verified),
            "gor_alarm_ms_p50": statistics.median(alarms), "gor_alarm_ms_p99": percentile(alarms, 0.99)}

