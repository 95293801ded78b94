"""The incast scenario: N senders to one receiver on one rail, without and with priority
flow control -- the traffic pattern PFC exists for.

Every server but the first sends ``size`` bytes from its rail-0 NIC to the first
server's rail-0 NIC at once (a `sendrecv` job with N pairs), ``iters`` times. The leaf's
port to the receiver gets N line rates for one: without PFC its queue overflows (tail
drops, repaired by go-back-N resends), with PFC the leaf pauses the senders' NICs (and,
across a spine, the spine pauses the leaf) and nothing is lost. The two runs share one
fabric: PFC is switched on and off on every switch over QueueControl (``SetPfc``) with
the spec's ``pfc`` thresholds, so nothing else differs. The fabric's queue depth is the
spec's, lowered to `INCAST_QUEUE_DEPTH` when it would hold every sender's window (then
the incast could not overflow it, with or without PFC).

Per run (the table: medians over the repeats): ``completion_s`` (the slowest rank's time per iteration), ``drops`` (packets
every switch dropped), ``resends`` (frames go-back-N sent again) and ``timeouts``,
``pauses`` (PAUSE frames the switches sent), ``paused_s`` (seconds the senders' NICs
stood paused, summed) and ``switch_paused_s`` (the same for switch queues), and the
headroom drops and watchdog storms, which a sound configuration keeps at 0, and the
run's fidelity (emulation/fidelity.py; the table says how many repeats were faithful):
a switch or NIC that reacts to PAUSE late because the CPU was busy needs more headroom
than the link's round trip, so headroom drops from an unfaithful run say nothing of
the sizing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Mapping

import grpc

from experiments.runner import write_spec
from emulation.fidelity import switches_window
from p4sim.runtime.queues import QueueControlClient, fidelity_of
from tccl.fidelity import agents_window
from tccl.job import WINDOW_BYTES, Job, Transport, Workload, job_from_fabric
from tccl.launch import run_on_fabric
from topo.addressing import AddressPlan
from topo.freeports import free_port_base
from topo.spec import FabricSpec, load_spec, replace

INCAST_SIZE = 512 * 1024      # bytes per sender and iteration
INCAST_ITERS = 3
# A shallow egress queue (packets): fewer than the senders' windows together, as in the
# shallow-buffered switches of real fabrics at this scale-down.
INCAST_QUEUE_DEPTH = 8
RUNS = ("no-pfc", "pfc")
TIMEOUT_S = 120.0             # emulated, one run


def incast_spec(spec: FabricSpec, prefix: str) -> FabricSpec:
    """``spec`` made ready for the scenario: its own node prefix and gRPC ports, and a
    queue shallower than the senders' windows together."""
    senders = spec.blocks * spec.servers_per_block - 1
    depth = spec.queue_depth
    if depth * spec.mtu >= senders * WINDOW_BYTES:
        depth = INCAST_QUEUE_DEPTH
    return replace(spec, node_prefix=prefix, queue_depth=depth,
                   grpc_port_base=free_port_base(len(AddressPlan(spec).switches)))


def incast_job(spec_file: Path, size: int = INCAST_SIZE, iters: int = INCAST_ITERS, seed: int = 1) -> Job:
    """Every server's rail-0 NIC sends to the first server's (a sendrecv with N pairs)."""
    spec = load_spec(spec_file)
    if spec.blocks * spec.servers_per_block < 2:
        raise ValueError(f"{spec_file}: an incast needs at least 2 servers")
    base = job_from_fabric(spec_file, Workload(), Transport(seed=seed))
    rail0 = [r.rank for r in base.ranks if r.rail == 0]
    pairs = tuple((s, rail0[0]) for s in rail0[1:])
    return job_from_fabric(spec_file, Workload(op="sendrecv", sizes=(size,), iters=iters, warmup=0,
                                               pairs=pairs), Transport(seed=seed), name="incast")


def set_pfc(clients: Mapping[str, QueueControlClient], spec: FabricSpec, on: bool) -> None:
    """PFC on (the spec's thresholds) or off on every switch."""
    p = spec.pfc
    for client in clients.values():
        if on:
            client.set_pfc([p.priority], p.xoff, p.xon, p.headroom, p.watchdog_ms)
        else:
            client.set_pfc([])


def switch_counters(clients: Mapping[str, QueueControlClient]) -> dict[str, float]:
    """Cumulative drops and PFC counters summed over every port of every switch, and
    each switch's drops (``drops@<switch>``: where the losses were)."""
    total = {"drops": 0.0, "pauses": 0.0, "switch_paused_s": 0.0, "headroom_drops": 0.0, "storms": 0.0}
    for name, client in clients.items():
        for st in client.queue_stats().values():
            pfc = st["pfc"]
            total["drops"] += st["drops"]
            total[f"drops@{name}"] = total.get(f"drops@{name}", 0.0) + st["drops"]
            total["pauses"] += sum(pfc["pause_tx"])
            total["switch_paused_s"] += sum(pfc["paused_s"])
            total["headroom_drops"] += pfc["headroom_drops"]
            total["storms"] += pfc["storms"]
    return total


def incast_run(fabric: Any, clients: Mapping[str, QueueControlClient], job: Job, run_dir: Path,
               pfc: bool) -> dict[str, Any]:
    """One run of ``job`` with PFC on or off: the numbers of the module docstring."""
    set_pfc(clients, fabric.spec, pfc)
    before, fidelity_before = switch_counters(clients), fidelity_of(clients)
    results = run_on_fabric(fabric, job, run_dir, timeout=TIMEOUT_S)
    after = switch_counters(clients)
    fidelity = switches_window(fidelity_before, fidelity_of(clients)).with_agents(
        *agents_window({s: r["fidelity"] for s, r in results.items()}))
    flows = [f for r in results.values() for f in r["flows"]]
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    numbers: dict[str, Any] = {k: int(delta[k]) for k in ("drops", "pauses", "headroom_drops", "storms")}
    numbers["switch_paused_s"] = round(delta["switch_paused_s"], 6)
    numbers["drops_by_switch"] = {k.split("@", 1)[1]: int(v) for k, v in delta.items() if k.startswith("drops@") and v}
    numbers.update(
        completion_s=max(row["time_us"] for r in results.values() for row in r["rows"]) / 1e6,
        wrong=sum(max(0, row["wrong"]) for r in results.values() for row in r["rows"]),
        resends=sum(f["retransmits"] for f in flows), timeouts=sum(f["timeouts"] for f in flows),
        nic_pauses=sum(n["pause_rx"] for r in results.values() for n in r["pfc"].values()),
        paused_s=round(sum(n["paused_s"] for r in results.values() for n in r["pfc"].values()), 4),
        faithful=fidelity.faithful, p99_lateness_pkt=round(fidelity.p99, 3), fidelity=fidelity.line())
    return numbers


def queue_clients(fabric: Any) -> tuple[dict[str, QueueControlClient], list[grpc.Channel]]:
    """A QueueControl client per switch of the fabric, and their channels to close."""
    channels, clients = [], {}
    for sw in fabric.plan.switches:
        channel = grpc.insecure_channel(sw.grpc_address)
        channels.append(channel)
        clients[sw.name] = QueueControlClient(channel, timeout=5.0)
    return clients, channels


COLUMNS = (("completion s", "completion_s", ".3f"), ("drops", "drops", "d"), ("resends", "resends", "d"),
           ("timeouts", "timeouts", "d"), ("PAUSE sent", "pauses", "d"), ("NIC paused s", "paused_s", ".3f"),
           ("switch paused s", "switch_paused_s", ".3f"), ("headroom drops", "headroom_drops", "d"),
           ("storms", "storms", "d"), ("faithful", "faithful", ""))


def format_incast_table(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per run kind: medians over the repeats."""
    rows = [["run"] + [h for h, _, _ in COLUMNS]]
    for name, r in runs.items():
        rows.append([name] + [format(int(r[k]) if f == "d" else r[k], f) for _, k, f in COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_incast(fabric_file: Path, out: Path, repeats: int = 3, size: int = INCAST_SIZE,
               iters: int = INCAST_ITERS, seed: int = 1, log: Any = print) -> dict[str, Any]:
    """The scenario: ``repeats`` x (without PFC, with PFC) on one fabric; writes
    ``out``/summary.json and returns it."""
    from controller.routes import program_fabric
    from topo.net import Fabric

    out.mkdir(parents=True, exist_ok=True)
    spec = incast_spec(load_spec(fabric_file), f"i{os.getpid() % 1000}")
    spec_file = write_spec(spec, out / "fabric.yaml")
    job = incast_job(spec_file, size, iters, seed)
    senders = len(job.workload.pairs)
    log(f"incast: {senders} senders -> 1 receiver, {size // 1024} KiB each x {iters}, queue depth "
        f"{spec.queue_depth} packets, PFC priority {spec.pfc.priority} xoff {spec.pfc.xoff} xon "
        f"{spec.pfc.xon} headroom {spec.pfc.headroom} bytes")
    load_start = os.getloadavg()[0]
    per_run: dict[str, list[dict[str, Any]]] = {name: [] for name in RUNS}
    with Fabric(spec, run_dir=out / "run", program=program_fabric) as fabric:
        clients, channels = queue_clients(fabric)
        try:
            for rep in range(repeats):
                for name in RUNS:
                    numbers = incast_run(fabric, clients, job, out / name / f"rep{rep + 1}", name == "pfc")
                    per_run[name].append(numbers)
                    log(f"repeat {rep + 1}/{repeats} {name:7s} " +
                        ", ".join(f"{k} {v}" for k, v in numbers.items() if k != "fidelity"))
                    log(f"  {numbers['fidelity']}")
        finally:
            for channel in channels:
                channel.close()
    medians = {name: {**{k: statistics.median(r[k] for r in runs) for k in runs[0]
                         if isinstance(runs[0][k], (int, float)) and not isinstance(runs[0][k], bool)},
                      "faithful": f"{sum(r['faithful'] for r in runs)}/{len(runs)}"}
               for name, runs in per_run.items()}
    summary = {"scenario": "incast", "senders": senders, "size": size, "iters": iters,
               "queue_depth": spec.queue_depth, "pfc": dataclasses.asdict(spec.pfc), "repeats": per_run,
               "runs": medians, "cpus": os.cpu_count(), "dilation": fabric.clock.dilation,
               "load_avg": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
               "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    log(format_incast_table(medians))
    return summary
