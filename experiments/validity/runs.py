"""The measuring runs of the validity checks, each on a small fabric of its own kind
(`check_spec`), each returning its figures beside the reference's (`reference`):

* `one_cnp` -- two hosts on one leaf, one flow at line rate, the paper's DCQCN profile.
  With the leaf's marking off, one packet is marked CE on purpose (`marking.mark_one`),
  twice, well apart; the sender's rate timeline (one row per `ONE_CNP_TIMELINE_S`) gives
  each cut (eq. 1: the depth is alpha / 2, alpha as decayed by eq. 2 since the flow
  started or since the last cut) and the recovery after it, sampled mid-way between
  rate-timer events (F fast-recovery halvings of the gap to Rt, then additive increase).
* `two_flows` -- a second flow joins a first on one leaf's uplink (the testbed's DCQCN
  set and marking, PFC off as the model assumes DCQCN acts first): the time to fair
  share, both flows' shares afterwards and the queue's range, beside DCQCN's fluid
  model (section 4, `fluid`) integrated for the same scaled parameters and its fixed
  point (CoNEXT 2016, section 3.2).
* `pfc_ingress` -- the DCQCN paper's PFC unfairness (its section 2): three flows from
  one leaf and one from a host of the receiver's own leaf, all to one NIC; the
  receiver's leaf sees the three on its spine port and the lone one on its host port.
  PFC alone (marking off: DCQCN never hears of the queue) shares per ingress port --
  1/2 for the lone flow, 1/6 for each of the three; with DCQCN (the spec's marking) the
  shares are per flow, 1/4 each. With one spine the flows need no source-port pinning.

* `victim` -- the DCQCN paper's victim flow (section 2): on the PFC check's fabric, an
  incast of three flows into one NIC of leaf 1 (two of them from leaf 0) and a fourth
  flow from leaf 0 to another NIC of leaf 1, sharing leaf 0's uplink and the spine's
  port to leaf 1 with the incast but bound to an idle egress. PFC alone pauses that
  spine port for the incast's queue, and the victim with it; with DCQCN the incast's
  senders slow down instead and the victim keeps its max-min share (1/3 of the link).
* `profiles` -- the same 3-to-1 incast on one leaf (PFC on) under each named DCQCN
  profile (`topo.ccprofiles`): the agents take the profile, the switches its scaled
  marking; ECN marks, CNPs and the flows' bandwidth of each.

Times are the fabric's emulated time; the load and each run's fidelity go with the
figures (`emulation.fidelity`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from emulation.fidelity import switches_window
from experiments.incast import queue_clients, set_pfc, switch_counters
from experiments.runner import write_spec
from experiments.validity import reference as ref
from experiments.validity.fluid import fixed_point, integrate
from experiments.validity.marking import mark_one, set_marking
from p4sim.runtime.queues import fidelity_of
from tccl import roce
from tccl.control import AgentClient, socket_path
from tccl.fidelity import agents_window
from tccl.job import Job, Transport, Workload, job_from_fabric
from tccl.launch import run_on_fabric
from topo.addressing import AddressPlan
from topo.ccprofiles import PROFILES, marking_packets
from topo.freeports import free_port_base
from topo.spec import EcnProfile, FabricSpec, parse_spec, replace

# Two hosts on one leaf, the paper's DCQCN set. Time factor 1000 (not the default
# 200): the CNP interval becomes 50 ms, some 15 frame times at 10 Mbit/s, so the few
# packets marked while mark_one's entry is held (a P4Runtime round trip or two) always
# fall in one CNP interval: one CNP per mark.
ONE_CNP_FABRIC = {"blocks": 1, "servers_per_block": 2, "rails": 1, "spines": 1, "dcqcn": "paper",
                  "time_factor": 1000, "dilation": "auto"}
ONE_CNP_TIMELINE_S = 0.005     # rate timeline period: a tenth of the rate timer (55 ms)
ONE_CNP_SIZE = 2_000_000       # bytes: ~1.7 s at line rate, the two cuts and their recovery
# Acked bytes of the flow at which each CE mark is made: after ~0.5 s (alpha decayed
# some 9 alpha timers from 1) and ~1.2 s (recovered: fast recovery is 5 T = 0.28 s).
ONE_CNP_MARK_AT = (600_000, 1_400_000)
RECOVERY_EVENTS = 6            # rate-increase events compared after each cut

# Three senders on leaf 0, one beside the receiver on leaf 1; one spine. PFC on (the
# spec's thresholds), the testbed's DCQCN set and marking.
# Marking saturates at Kmax = 6 frames (25 KB), below the PFC XOFF of one ingress port
# (32 KB): DCQCN must act before PFC does (without that, measured: the queue never
# reaches the marking that would cut the flows to their fair share, PFC keeps the
# per-port shares and DCQCN only adds CNPs).
PFC_FABRIC = {"blocks": 2, "servers_per_block": 3, "rails": 1, "spines": 1, "dilation": "auto",
              "pfc": {"enabled": True}, "ecn": {"kmin": 1, "kmax": 6, "pmax": 0.2}}
PFC_SIZE = 1_500_000           # bytes per flow, of the victim check's flows too (same fabric)

# Two senders on leaf 0, two receivers on leaf 1, one spine: both flows share leaf 0's
# uplink. The second joins once the first has this many bytes acknowledged (~0.6 s).
# Its agents start mid-run: they set up before they are real-time (emulation/realtime.py), so
# the first job's keep the CPU -- under chrt that burst made them late (p99 8-25 packet
# times at dilation 1.1, 4-8 at 2) and this fabric ran at a fixed dilation 3.
# Flows of ~8 emulated seconds shared: at this scale a
# flow sends ~3 frames per rate timer, so its rate swings by whole cuts and the shares
# of a 2 s run spread widely; 8 s average them (docs/validation.md, check 2).
TWO_FLOWS_FABRIC = {"blocks": 2, "servers_per_block": 2, "rails": 1, "spines": 1, "dilation": "auto"}
TWO_FLOWS_SIZES = (6_000_000, 4_800_000)
TWO_FLOWS_JOIN_AT = 750_000
# One leaf, four servers: three send to the first at once, PFC on.
PROFILES_FABRIC = {"blocks": 1, "servers_per_block": 4, "rails": 1, "spines": 1, "dilation": "auto",
                   "pfc": {"enabled": True}}
PROFILES_SIZE = 1_000_000      # bytes per sender
WINDOW_S = 0.2                 # goodput windows of the shares
FAIR_BAND = 0.1                # "fair": each flow within 10 % of half the link
# The model's control-loop delay tau*: a frame's time on the two links to the receiver
# and the CNP's way back, about two frame times of the emulated links.
FEEDBACK_FRAMES = 2.0
PFC_TIMELINE_S = 0.05
TIMEOUT_S = 120.0              # emulated, one run


def check_spec(base: Mapping[str, Any], prefix: str, out: Path) -> tuple[FabricSpec, Path]:
    """A check's fabric with its own node prefix and free gRPC ports, and its spec file
    in ``out`` (the jobs name it)."""
    spec = parse_spec(dict(base), "validity check")
    spec = replace(spec, node_prefix=prefix, grpc_port_base=free_port_base(len(AddressPlan(spec).switches)))
    return spec, write_spec(spec, out / "fabric.yaml")


def _sender_timeline(results: Mapping[str, Any], job: Job, rank: int) -> list[list[float]]:
    flows = results[job.ranks[rank].server]["timeline"]["flows"]
    return next(rows for q, rows in flows.items() if int(q) >> 10 & 0x3FF == rank)


def _origin(results: Mapping[str, Any], job: Job, rank: int) -> float:
    return results[job.ranks[rank].server]["timeline"]["origin_s"]


def _run(fabric: Any, clients: Mapping[str, Any], job: Job, run_dir: Path,
         during: Callable[[], None] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``job``, calling ``during()`` while it runs: its results and the run's
    numbers (switch drops, PAUSE frames, fidelity, the machine's load and the share of
    its CPU time the hypervisor stole, `emulation.host`)."""
    before, fid_before = switch_counters(clients), fidelity_of(clients)
    load = os.getloadavg()[0]
    outcome: dict[str, Any] = {}
    errors: list[BaseException] = []

    def target() -> None:
        try:
            outcome.update(run_on_fabric(fabric, job, run_dir, timeout=TIMEOUT_S))
        except BaseException as e:  # noqa: BLE001 -- raised again on the caller's thread
            errors.append(e)

    runner = threading.Thread(target=target, name="validity-job")
    runner.start()
    try:
        if during is not None:
            during()
    finally:
        runner.join()
    if errors:
        raise errors[0]
    after = switch_counters(clients)
    fidelity = switches_window(fid_before, fidelity_of(clients)).with_agents(
        *agents_window({s: r["fidelity"] for s, r in outcome.items()}))
    numbers = {"drops": int(after["drops"] - before["drops"]), "pauses": int(after["pauses"] - before["pauses"]),
               "faithful": fidelity.faithful, "p99_lateness_pkt": round(fidelity.p99, 3),
               "fidelity": fidelity.line(), "host_steal": fidelity.steal,
               "dilation_needed": fidelity.dilation_needed(),
               "load_start": round(load, 2), "load_end": round(os.getloadavg()[0], 2)}
    return outcome, numbers


def _wait_acked(run_dir: Path, server: str, dst_ip: str, acked: int, timeout: float = 60.0) -> None:
    """Block until the flow from ``server`` to ``dst_ip`` has ``acked`` bytes acknowledged."""
    path = socket_path(run_dir, server)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            try:
                with AgentClient(path) as client:
                    if any(f.dst_ip == dst_ip and f.acked_bytes >= acked for f in client.list_flows()):
                        return
            except Exception:  # noqa: BLE001 -- the agent may not listen yet
                pass
        time.sleep(0.01)
    raise TimeoutError(f"{server} -> {dst_ip}: {acked} bytes not acknowledged within {timeout:.0f} s")


def _cuts(rows: list[list[float]]) -> list[int]:
    """Indices of the timeline rows where a CNP was first counted."""
    return [i for i in range(1, len(rows)) if rows[i][4] > rows[i - 1][4]]


def _rate_at(rows: list[list[float]], t: float) -> float:
    """The DCQCN rate of the last row at or before ``t``."""
    return [r for r in rows if r[0] <= t][-1][2]


def one_cnp(fabric: Any, spec_file: Path, run_dir: Path) -> dict[str, Any]:
    """The one-CNP check (module docstring); figures as ``measured``/``reference`` pairs."""
    plan = fabric.plan
    sender, receiver = plan.servers[0].nics[0], plan.servers[1].nics[0]
    job = job_from_fabric(spec_file, Workload(op="sendrecv", sizes=(ONE_CNP_SIZE,), iters=1, warmup=0,
                                              pairs=((0, 1),)),
                          Transport(timeline_s=ONE_CNP_TIMELINE_S), name="one-cnp")
    params = job.transport.dcqcn()
    marks: list[tuple[int, float]] = []

    def mark_twice() -> None:
        for acked in ONE_CNP_MARK_AT:
            _wait_acked(run_dir, sender.server, receiver.ip, acked)
            marks.append(mark_one(fabric, receiver.leaf, receiver.leaf_port))

    set_marking(fabric, None)
    clients, channels = queue_clients(fabric)
    try:
        results, numbers = _run(fabric, clients, job, run_dir, mark_twice)
    finally:
        for channel in channels:
            channel.close()
        set_marking(fabric, fabric.spec.ecn)
    rows = _sender_timeline(results, job, 0)
    return {**numbers, "marks": [m for m, _ in marks], "mark_held_s": [round(h, 4) for _, h in marks],
            "cnps": rows[-1][4], "line_bps": params.line_rate, "rate_timer_s": params.rate_timer,
            "alpha_timer_s": params.alpha_timer, "g": params.g, "cuts": cut_figures(rows, params)}


def cut_figures(rows: list[list[float]], params: Any) -> list[dict[str, Any]]:
    """What each CNP of a sender's timeline ``rows`` did to its rate, against DCQCN's
    equations with ``params`` (`tccl.dcqcn.DcqcnParams`): the cut, alpha, the alpha
    timers since the last cut and the recovery, each beside the reference's."""
    out: list[dict[str, Any]] = []
    alpha, since = 1.0, rows[0][0]          # alpha starts at 1 with the flow (section 3.1)
    for i in _cuts(rows):
        t, before, after = rows[i][0], rows[i - 1][2], rows[i][2]
        periods = math.floor((t - since) / params.alpha_timer)
        predicted_alpha = ref.alpha_decayed(alpha, params.g, periods)
        measured_alpha = 2 * (1 - after / before)
        recovered = ref.recovery(before, after, RECOVERY_EVENTS, params.fast_recovery_steps, params.rate_ai,
                                 params.line_rate)
        samples = [_rate_at(rows, t + (k + 0.5) * params.rate_timer) for k in range(RECOVERY_EVENTS + 1)]
        out.append({
            "t_s": t, "rate_before": before, "rate_after": after,
            "cut_ratio": after / before, "cut_ratio_ref": ref.cut(before, predicted_alpha) / before,
            "alpha": measured_alpha, "alpha_ref": predicted_alpha,
            # alpha timers since the flow's start or the last cut, as alpha's decay says
            # (a whole count read back through a log: rounded, or 1 + 1.4e-14 fails "<= 1");
            # None when the row after the CNP shows no cut at all (seen once at 40 % host
            # steal): there is no alpha to read back, and the run says what it measured.
            "alpha_periods": (round(math.log(measured_alpha / alpha) / math.log(1 - params.g), 6)
                              if measured_alpha > 0 else None),
            "alpha_periods_ref": periods,
            "recovery": [r / before for r in samples], "recovery_ref": [r / before for r in recovered]})
        # From here alpha is the measured one (the model's, if no cut was seen), updated by
        # the cut (eq. 1), decaying anew.
        alpha = ref.alpha_after_cnp(measured_alpha if measured_alpha > 0 else predicted_alpha, params.g)
        since = t
    return out


def _flow_set(fabric: Any, spec_file: Path, run_dir: Path, senders: Mapping[str, tuple[Any, Any]], name: str,
              dcqcn: bool, pfc: bool, size: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Run the flows ``senders`` (name -> (source NIC, destination NIC)), ``size`` bytes
    each, with the switches' marking on (``dcqcn``) or off (PFC alone, no CNP ever) and
    PFC on or off: each flow's goodput (bit/s, payload) over the second half of the time
    all ran, and the run's numbers (`_run`, with the window, CNPs and retransmits)."""
    base = job_from_fabric(spec_file, Workload())
    rank_of = {r.ip: r.rank for r in base.ranks}
    pairs = tuple((rank_of[src.ip], rank_of[dst.ip]) for src, dst in senders.values())
    job = job_from_fabric(spec_file, Workload(op="sendrecv", sizes=(size,), iters=1, warmup=0, pairs=pairs),
                          Transport(timeline_s=PFC_TIMELINE_S), name=name)
    set_marking(fabric, fabric.spec.ecn if dcqcn else None)
    clients, channels = queue_clients(fabric)
    try:
        set_pfc(clients, fabric.spec, pfc)
        results, numbers = _run(fabric, clients, job, run_dir)
    finally:
        set_pfc(clients, fabric.spec, fabric.spec.pfc.enabled)
        for channel in channels:
            channel.close()
        set_marking(fabric, fabric.spec.ecn)
    # Every timeline on the fabric's clock: from its agent's origin.
    lines = {}
    for flow, (src, _) in zip(senders, pairs):
        origin = _origin(results, job, src)
        lines[flow] = [[r[0] + origin, *r[1:]] for r in _sender_timeline(results, job, src)]
    start = max(rows[0][0] for rows in lines.values())
    end = min(next(r[0] for r in rows if r[1] == rows[-1][1]) for rows in lines.values())
    mid = (start + end) / 2
    goodput = {}
    for flow, rows in lines.items():
        inside = [r for r in rows if mid <= r[0] <= end]
        (ta, acked_a), (tb, acked_b) = inside[0][:2], inside[-1][:2]
        goodput[flow] = (acked_b - acked_a) * 8 / (tb - ta)
    return goodput, {**numbers, "window_s": round(end - mid, 3), "cnps": sum(rows[-1][4] for rows in lines.values()),
                     "retransmits": sum(rows[-1][3] for rows in lines.values())}


def pfc_ingress(fabric: Any, spec_file: Path, run_dir: Path, dcqcn: bool, pfc: bool = True,
                size: int = PFC_SIZE) -> dict[str, Any]:
    """One run of the PFC check (module docstring), every flow sending ``size`` bytes:
    each flow's share of what the receiver's link carried over the second half of the
    time all four ran, beside the reference's."""
    plan = fabric.plan
    receiver = plan.server_at(1, 0).nics[0]
    senders = {f"remote{i}": (plan.server_at(0, i).nics[0], receiver) for i in range(3)} | \
        {"local": (plan.server_at(1, 1).nics[0], receiver)}
    goodput, numbers = _flow_set(fabric, spec_file, run_dir, senders, "pfc-ingress", dcqcn, pfc, size)
    # Shares of what the receiver's link carried (goodput: payload, without headers).
    total = sum(goodput.values())
    shares = {name: g / total for name, g in goodput.items()}
    tree = {"spine": {f"remote{i}": f"remote{i}" for i in range(3)}, "local": "local"}
    expected = ref.dcqcn_shares(tree) if dcqcn else ref.pfc_shares(tree)
    return {**numbers, "shares": shares, "shares_ref": expected,
            "link_use": total / (fabric.spec.links.host_mbps * 1e6)}


def victim(fabric: Any, spec_file: Path, run_dir: Path, dcqcn: bool, pfc: bool = True,
           size: int = PFC_SIZE) -> dict[str, Any]:
    """One run of the victim-flow check (module docstring): the victim's and the
    incast's goodput as fractions of the line rate, beside the max-min fair shares."""
    plan = fabric.plan
    receiver = plan.server_at(1, 0).nics[0]
    senders = {f"incast{i}": (plan.server_at(0, i).nics[0], receiver) for i in range(2)} | \
        {"incast_local": (plan.server_at(1, 1).nics[0], receiver),
         "victim": (plan.server_at(0, 2).nics[0], plan.server_at(1, 2).nics[0])}
    goodput, numbers = _flow_set(fabric, spec_file, run_dir, senders, "victim", dcqcn, pfc, size)
    line = fabric.spec.links.host_mbps * 1e6
    fair = ref.victim_fair_shares()
    # The victim's lead over the incast flows on its uplink: about 0 when PFC pauses it
    # with them, what it gains when it is not (the paper's point).
    sharing = [goodput[f"incast{i}"] / line for i in range(2)]
    return {**numbers, "victim": goodput["victim"] / line, "victim_ref": fair["victim"],
            "victim_lead": goodput["victim"] / line - sum(sharing) / len(sharing),
            "incast": {k: g / line for k, g in goodput.items() if k != "victim"}, "incast_ref": fair["incast"],
            "receiver_link_use": sum(g for k, g in goodput.items() if k != "victim") / line}


def _shares(lines: Mapping[str, list[list[float]]], start: float, end: float) -> list[tuple[float, list[float]]]:
    """(window start, each flow's share of the pair's goodput) per `WINDOW_S` window."""
    out = []
    t = start
    while t + WINDOW_S <= end:
        acked = [_acked_between(rows, t, t + WINDOW_S) for rows in lines.values()]
        if sum(acked):
            out.append((t, [a / sum(acked) for a in acked]))
        t += WINDOW_S
    return out


def _acked_between(rows: list[list[float]], start: float, end: float) -> float:
    inside = [r for r in rows if start <= r[0] <= end]
    return inside[-1][1] - inside[0][1] if len(inside) > 1 else 0.0


def _fair_from(windows: list[tuple[float, list[float]]]) -> float | None:
    """Start of the first window whose shares are all within `FAIR_BAND` of 1/2."""
    return next((t for t, shares in windows if all(abs(x - 0.5) <= FAIR_BAND * 0.5 for x in shares)), None)


def _pair_job(spec_file: Path, src_ip: str, dst_ip: str, size: int, name: str) -> Job:
    """A job of just two NICs (ranks 0 and 1), 0 sending ``size`` bytes to 1: jobs
    started apart must not share a server (agents are per server)."""
    base = job_from_fabric(spec_file, Workload(), Transport(timeline_s=0.05))
    ranks = [dataclasses.replace(r, rank=i) for i, r in
             enumerate(sorted((r for r in base.ranks if r.ip in (src_ip, dst_ip)), key=lambda r: r.ip != src_ip))]
    return Job(ranks=tuple(ranks), transport=base.transport, name=name, fabric=base.fabric,
               workload=Workload(op="sendrecv", sizes=(size,), iters=1, warmup=0, pairs=((0, 1),)))


def two_flows(fabric: Any, spec_file: Path, run_dir: Path) -> dict[str, Any]:
    """The fluid-model check (module docstring): fabric and model side by side."""
    plan = fabric.plan
    nics = [(plan.server_at(0, i).nics[0], plan.server_at(1, i).nics[0]) for i in range(2)]
    jobs = [_pair_job(spec_file, a.ip, b.ip, size, f"flow{i}")
            for i, ((a, b), size) in enumerate(zip(nics, TWO_FLOWS_SIZES))]
    leaf, port = plan.leaf(0, 0).name, plan.uplink_port(0)
    queue: list[tuple[float, int]] = []
    clients, channels = queue_clients(fabric)
    second: dict[str, Any] = {}
    done = threading.Event()

    def sample_queue() -> None:
        while not done.is_set():
            depth = clients[leaf].queue_stats()[port]["qdepth"]
            queue.append((fabric.clock.now(), depth))
            time.sleep(0.01)

    def join() -> None:
        sampler = threading.Thread(target=sample_queue, name="queue-sampler")
        sampler.start()
        try:
            _wait_acked(run_dir / "flow0", nics[0][0].server, nics[0][1].ip, TWO_FLOWS_JOIN_AT)
            second.update(run_on_fabric(fabric, jobs[1], run_dir / "flow1", timeout=TIMEOUT_S))
        finally:
            done.set()
            sampler.join()

    try:
        first, numbers = _run(fabric, clients, jobs[0], run_dir / "flow0", join)
    finally:
        for channel in channels:
            channel.close()
    lines = {}
    for i, results in enumerate((first, second)):
        src = jobs[i].workload.pairs[0][0]
        origin = _origin(results, jobs[i], src)
        lines[f"flow{i}"] = [[r[0] + origin, *r[1:]] for r in _sender_timeline(results, jobs[i], src)]
    joined = lines["flow1"][0][0]
    end = min(next(r[0] for r in rows if r[1] == rows[-1][1]) for rows in lines.values())
    windows = _shares(lines, joined, end)
    fair = _fair_from(windows)
    after = [x for t, x in windows if fair is not None and t >= fair]
    q_after = sorted(d for t, d in queue if fair is not None and fair <= t <= end)
    if fair is not None:    # the link's use once fair: both flows' goodput (payload) / line
        acked = [_acked_between(rows, fair, end) for rows in lines.values()]
        link_use = sum(acked) * 8 / (end - fair) / (fabric.spec.links.uplink_mbps * 1e6)
    else:
        link_use = float("nan")

    # The model: the same parameters, the second flow joining as late after the first.
    t = jobs[0].transport
    params, ecn = t.dcqcn(), fabric.spec.ecn
    packet = t.mtu + roce.HDR_LEN + roce.ICRC_LEN
    frame_time = packet * 8 / t.line_rate_bps
    first_start = lines["flow0"][0][0]
    model = integrate(params, ecn, fabric.spec.links.uplink_mbps * 1e6, packet,
                      [0.0, joined - first_start], end - first_start, FEEDBACK_FRAMES * frame_time)
    model_lines = {f"flow{i}": [[first_start + tm, 0.0] for tm in model.t[::100]] for i in range(2)}
    for i, rows in enumerate(model_lines.values()):      # acked bits as the integral of RC
        sent = np.cumsum(model.rc[:, i]) * (model.t[1] - model.t[0]) / 8
        for row, acked in zip(rows, sent[::100]):
            row[1] = acked
    model_windows = _shares(model_lines, joined, end)
    model_fair = _fair_from(model_windows)
    mq = model.q[(model.t + first_start >= (model_fair or end)) & (model.t + first_start <= end)]

    def pct(values: Any, p: float) -> float:
        return float(np.percentile(values, p)) if len(values) else float("nan")

    return {**numbers, "joined_s": round(joined - first_start, 3), "kmin": ecn.kmin, "kmax": ecn.kmax,
            "fair_after_s": None if fair is None else round(fair - joined, 3),
            "fair_after_s_model": None if model_fair is None else round(model_fair - joined, 3),
            "shares_after": [float(np.mean([x[i] for x in after])) for i in range(2)] if after else [],
            "worst_window_share": max((abs(x - 0.5) for w in after for x in w), default=float("nan")) + 0.5,
            "queue_p5_p50_p95": [pct(q_after, p) for p in (5, 50, 95)],
            "queue_p5_p50_p95_model": [round(pct(mq, p), 2) for p in (5, 50, 95)],
            "queue_fixed_point": round(fixed_point(params, ecn, fabric.spec.links.uplink_mbps * 1e6, packet, 2).q, 2),
            "queue_samples": len(q_after), "link_use": link_use}


def profiles(fabric: Any, spec_file: Path, run_dir: Path, names: tuple[str, ...] = tuple(PROFILES)) -> dict[str, Any]:
    """The incast under each profile of ``names``: its scaled marking (packets), ECN
    marks the receiver saw, CNPs the senders got, the slowest flow's and the mean
    bandwidth (Mbit/s), PAUSE frames, drops and the run's fidelity."""
    spec = fabric.spec
    base = job_from_fabric(spec_file, Workload())
    ranks = [r.rank for r in base.ranks]
    pairs = tuple((s, ranks[0]) for s in ranks[1:])
    out = {}
    clients, channels = queue_clients(fabric)
    try:
        for name in names:
            profile = PROFILES[name]
            ecn = EcnProfile(*marking_packets(profile, spec.links.host_mbps, spec.time_factor, spec.frame_bytes)) \
                if profile.has_marking else spec.ecn
            job = job_from_fabric(spec_file, Workload(op="sendrecv", sizes=(PROFILES_SIZE,), iters=1, warmup=0,
                                                      pairs=pairs),
                                  Transport(dcqcn_profile=profile), name=f"profile-{name}")
            set_marking(fabric, ecn)
            try:
                results, numbers = _run(fabric, clients, job, run_dir / name)
            finally:
                set_marking(fabric, spec.ecn)
            flows = [f for r in results.values() for f in r["flows"]]
            rates = [row["busbw_mbps"] for r in results.values() for row in r["rows"]
                     if any(f["packets"] for f in r["flows"])]
            out[name] = {**numbers, "ecn": [ecn.kmin, ecn.kmax, ecn.pmax],
                         "ecn_marks": sum(f["ce_marked_rx"] for f in flows), "cnps": sum(f["cnps"] for f in flows),
                         "busbw_mbps_min": min(rates), "busbw_mbps_mean": sum(rates) / len(rates),
                         "retransmits": sum(f["retransmits"] for f in flows)}
    finally:
        for channel in channels:
            channel.close()
    return out
