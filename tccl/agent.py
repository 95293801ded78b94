"""``python -m tccl.agent``: the TCCL agent of one server.

Runs inside the server's network namespace (its Mininet host), opens one raw socket
per rail NIC (one rank each), serves the control channel on a Unix socket in the run
directory, runs the job's workload -- an nccl-tests style sweep of one collective over
message sizes, or a trace's training iterations -- prints the results and writes
``results-<server>.json``. It then keeps
answering its peers until every agent of the job has all its data acknowledged (the
finish barrier), so that a peer whose last ACK was lost can still finish, and exits.

Every time it measures or waits for (iterations, compute steps, the start barrier,
lingering) is the fabric's emulated time (``--clock``, else ``ASTRAL_CLOCK``), so the
results' time, algbw and busbw are those of the modelled network however much the
clock is dilated.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from emulation.clock import ENV as CLOCK_ENV
from emulation.clock import ClockError, EmulationClock
from emulation.realtime import enter_realtime, settle_heap
from p4sim.switch.ports import PortError
from tccl import collectives as C
from tccl import ports as P
from tccl import trace as T
from tccl.control import ControlServer, socket_path
from tccl.engine import Engine
from tccl.job import Job, JobError, load_job
from tccl.rundir import clear_markers, done_path, ready_path, results_path
from tccl.results import HEADER, Row, bus_factor, format_fidelity, format_row, save
from tccl.traffic import Traffic
from tccl.trace import Step, Trace
from topo.addressing import AddressPlan
from topo.spec import NICS

# Stop lingering once no frame has arrived for this many retransmission timeouts, even
# if the finish barrier is not complete (a peer that died never marks itself done).
QUIET_RTOS = 4
MAX_LINGER = 30.0           # emulated seconds
# How long (emulated s) an agent waits for the other agents of the job to open their
# NICs before it starts anyway (go-back-N then recovers what reached a NIC not yet open).
START_BARRIER = 30.0
# How often (emulated s) the barrier looks for the other agents' markers: a file
# appearing wakes nothing, so it is polled.
BARRIER_POLL = 0.01
# What GOR publishes into the run directory (controller/publish.py).
GOR_TOPOLOGY = "gor-topology.json"


def _barrier(engine: Engine, job: Job, run_dir: Path) -> None:
    """Wait (serving the control channel) until every server's agent has its NICs open.
    A run directory holds one job: markers are never removed during it."""
    servers = {r.server for r in job.ranks}
    end = engine.clock() + START_BARRIER
    while not all(ready_path(run_dir, s).exists() for s in servers) and engine.clock() < end:
        engine.run_for(BARRIER_POLL)


def workload_flows(job: Job, ring: list[int], trace: Trace | None = None) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs that carry the workload's data. A trace's flows are
    the union over its steps (planned together, although steps run one after another)."""
    if trace is not None:
        flows: dict[tuple[int, int], None] = {}
        for step in trace.steps:
            if step.op is not None:
                flows.update(dict.fromkeys(step_flows(job, step)))
        return list(flows)
    if job.workload.algo == "tree":
        return C.tree_flows(C.tree_order(job.ranks, job.workload.order))
    return _op_flows(job.workload.op, ring, list(job.workload.pairs))


def step_flows(job: Job, step: Step) -> list[tuple[int, int]]:
    """The (src, dst) pairs one collective step of a trace sends on (PXN's hops when
    the job relays its all-to-alls)."""
    rings, pairs = _step_layout(job, step)
    if _uses_pxn(job, step):
        return C.pxn_plan(T.step_groups(step, job.ranks), job.ranks).net_flows()
    flows: dict[tuple[int, int], None] = dict.fromkeys(pairs)
    for r in rings:
        flows.update(dict.fromkeys(_op_flows(step.op, r, [])))
    return list(flows)


def _op_flows(op: str, ring: list[int], pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if op == "sendrecv":
        return list(pairs)
    if op == "alltoall":
        return [(a, b) for a in ring for b in ring if a != b]
    if op in ("broadcast", "reduce"):
        chain = C.rooted_chain(ring)
        down = list(zip(chain, chain[1:]))
        return down if op == "broadcast" else [(b, a) for a, b in down]
    return C.ring_flows(ring)


def _uses_pxn(job: Job, step: Step) -> bool:
    return job.transport.pxn and step.op == "alltoall"


def _step_layout(job: Job, step: Step) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """(rings of the step's groups, send/recv pairs) of one trace step."""
    if step.group == "pp":
        return [], T.pp_pairs(job.ranks)
    return [C.ring_order(g, job.workload.order) for g in T.step_groups(step, job.ranks)], []


def port_function(job: Job, ring: list[int], trace: Trace | None = None,
                  groups: P.Groups | None = None, plan: AddressPlan | None = None
                  ) -> tuple[Callable[..., int], dict[str, int]]:
    """Source port per QP -- ``port(local rank, peer rank[, QP index])`` -- as the job's
    port mode plans it, and the plan by name (``"a->b#qp"``: what the agent reports).

    Every agent computes the same plan from the same job file (and the ECMP ``groups``
    GOR published, if any), so a flow's port is known everywhere without any exchange.
    With several QPs per connection each QP is a flow of its own in the plan.
    Orthogonal ports need the fabric's addressing ``plan``: by default the one of the
    job's ``fabric`` spec.
    """
    port, planned = planned_ports(job, ring, trace, groups, plan)
    return port, {"->".join(map(str, k[:2])) + (f"#{k[2]}" if len(k) > 2 else ""): p
                  for k, p in planned.items()}


def planned_ports(job: Job, ring: list[int], trace: Trace | None = None,
                  groups: P.Groups | None = None, plan: AddressPlan | None = None
                  ) -> tuple[Callable[..., int], dict[tuple[int, ...], int]]:
    """`port_function`'s ``port`` and the plan by key (``(local, peer)``, or with the
    QP index when the job has several): the flow-level model (`scale.flows`) looks up
    a 100k-GPU job's 200 000 flows in it and needs no names."""
    t = job.transport
    ranks = {r.rank: r for r in job.ranks}
    pairs = [(a, b) for a, b in workload_flows(job, ring, trace)
             if not (t.nvlink_gbps > 0 and ranks[a].server == ranks[b].server)]
    keys: list[tuple[int, ...]] = list(pairs) if t.qps == 1 else \
        [(a, b, i) for a, b in pairs for i in range(t.qps)]
    if t.ports == "orthogonal":
        if not job.fabric:
            raise JobError(f"job {job.name!r}: transport.ports: orthogonal needs the job's `fabric` spec")
        if plan is None:
            from topo.spec import load_spec
            plan = AddressPlan(load_spec(job.fabric))
        by_ip = P.orthogonal_ports(plan, [(ranks[k[0]].ip, ranks[k[1]].ip, *k[2:]) for k in keys],
                                   t.seed, groups)
        planned = {k: by_ip[(ranks[k[0]].ip, ranks[k[1]].ip, *k[2:])] for k in keys}
    else:
        planned = P.random_ports(keys, t.seed)

    def port(local: int, peer: int, index: int = 0) -> int:
        key = (local, peer) if t.qps == 1 else (local, peer, index)
        if key in planned:
            return planned[key]
        seed = f"{t.seed}/{local}/{peer}" + (f"/{index}" if index else "")
        return P.random_ports([key], seed)[key]

    return port, planned


def collective_timeout(job: Job, op: str, size: int) -> float:
    """A generous bound for one collective: 20x its ideal time at line rate, plus 30 s."""
    n = len(job.ranks)
    factor = 2.0 if op == "allreduce" else 1.0 if op != "alltoall" else n
    return 30.0 + 20 * factor * size * 8 / job.transport.line_rate_bps


def run(job: Job, server: str, run_dir: Path, out: Any = sys.stdout,
        clock: EmulationClock | None = None, nic: str = "python", rt_priority: int = 0) -> dict[str, Any]:
    """Run the job's workload for ``server``'s ranks on the fabric's ``clock`` (default:
    `EmulationClock.from_env`) over transport ``nic`` (`tccl.engine.NICS`), under
    SCHED_RR at ``rt_priority`` once set up (0: normal scheduling; emulation/realtime.py);
    returns what it saves as JSON."""
    w = job.workload
    trace = T.load_trace(w.trace) if w.trace else None
    ring = C.ring_order(job.ranks, w.order)
    tree = C.tree_order(job.ranks, w.order) if w.algo == "tree" else None
    # GOR's published topology: ECMP groups as failed cables left them.
    try:
        groups = P.load_groups(run_dir / GOR_TOPOLOGY) if job.transport.ports == "orthogonal" else None
    except ValueError as e:
        raise JobError(str(e)) from e
    port, planned = port_function(job, ring, trace, groups)
    engine = Engine(job, server, ports=port, clock=clock, nic=nic)
    rows: list[Row] = []
    extra: dict[str, Any] = {}
    clear_markers(run_dir, server)
    # Set up before real-time (niced: emulation/realtime.py); the NIC threads the engine
    # starts inherit the real-time priority (the library goes one below: tccl/nic/device.c).
    enter_realtime(rt_priority)
    with engine:
        control = ControlServer(engine, socket_path(run_dir, server)).start()
        settle_heap()
        ready_path(run_dir, server).touch()
        try:
            _barrier(engine, job, run_dir)
            what = f"trace {trace.name}" if trace else w.op
            print(f"# tccl agent {server}: {what} ({w.algo}), {len(ring)} ranks, order {w.order}, "
                  f"ports {job.transport.ports}, local ranks {sorted(engine.local)}", file=out, flush=True)
            if trace is not None:
                extra = {"trace": trace.name, **_run_trace(engine, job, trace, out)}
            else:
                rows = _sweep(engine, job, ring, out, tree)
            _linger(engine, job, run_dir, server)
            flows = [{**qp.describe(), "rx": vars(qp.responder.stats), "rx_last_sport": qp.responder.last_sport}
                     for qp in engine.qps.values()]
            fidelity = engine.fidelity()
            pfc = engine.pfc()
            print(format_fidelity(fidelity), file=out, flush=True)
        finally:
            control.stop()
    rank_info = {r.rank: r for r in job.ranks}
    if tree is not None:
        extra.update(tree={str(c): p for c, p in tree.items()}, tree_hops=C.tree_hops(tree, rank_info))
    meta = {"job": job.name, "server": server, "op": w.op, "order": w.order, "algo": w.algo,
            "ports": job.transport.ports, "ranks": len(ring), "local_ranks": sorted(engine.local),
            "ring": ring, "ring_hops": C.ring_hops(ring, rank_info),
            "planned_ports": planned, "gor_groups": groups is not None, "nic": nic, "line_mbps": job.transport.line_mbps, "flows": flows,
            "fidelity": fidelity, "pfc": pfc,
            # t_s counts from origin_s, the agent's start on the fabric's clock, so that
            # the timelines of several agents line up.
            "timeline": {"columns": ["t_s", "acked_bytes", "rate_bps", "retransmits", "cnps"],
                         "origin_s": engine.started, "flows": {str(q): rows for q, rows in engine.timeline.items()}}, **extra}
    save(results_path(run_dir, server), meta, rows)
    return {**meta, "rows": [vars(r) for r in rows]}


def _sweep(engine: Engine, job: Job, ring: list[int], out: Any, tree: C.Tree | None = None) -> list[Row]:
    """nccl-tests style: per size, warm-up then timed iterations of one collective
    (an AllReduce over ``tree`` when the job's algorithm is a tree)."""
    w, seed = job.workload, job.transport.seed
    print(HEADER, file=out, flush=True)
    rows = []
    for size in w.sizes:
        times, wrong = [], 0
        for it in range(w.warmup + w.iters):
            progs, _ = C.programs_for(w.op, engine, ring, size, seed, w.pairs, tree)
            start = engine.clock()
            results = C.run_collective(engine, progs, collective_timeout(job, w.op, size))
            if it >= w.warmup:
                times.append(engine.clock() - start)
            if w.check and it == w.warmup + w.iters - 1:
                wrong = sum(results[r] != C.expected(w.op, ring, r, size, seed, w.pairs) for r in results)
        row = Row.measure(w.op, size, len(ring), statistics.mean(times), wrong if w.check else -1)
        rows.append(row)
        print(format_row(row), file=out, flush=True)
    return rows


def _run_trace(engine: Engine, job: Job, trace: Trace, out: Any) -> dict[str, Any]:
    """Run the trace's iterations, every group of a step at once. Returns seconds per
    iteration (as this server saw them), the bytes this server's ranks sent per (op,
    group) and per channel (`tccl.traffic`), with ``workload.check`` how many of its
    ranks' results were wrong, and with ``transport.tp_split`` the NVLink share used by
    each split tp AllReduce and how many of those results were wrong."""
    t, w = job.transport, job.workload
    split = t.tp_split and t.nvlink_gbps > 0
    balancer = C.SplitBalancer(t.nvlink_gbps * 1e9, t.line_rate_bps, t.nvlink_latency_us * 1e-6,
                               C.net_latency_s(t.mtu, t.line_rate_bps)) if split else None
    traffic = Traffic(job.ranks, _blocks_per_pod(job))
    times, shares, wrong, split_wrong = [], [], 0, 0
    for it in range(trace.iterations):
        start = engine.clock()
        for step in trace.steps:
            if step.op is None:
                engine.run_for(step.compute_ms / 1000)
                continue
            sent: dict[tuple[int, int, str], int] = {}
            rings, _ = _step_layout(job, step)
            if balancer is not None and step.group == "tp" and step.op == "allreduce":
                shares.append(balancer.share_for(step.size, len(rings[0])))
                split_wrong += _split_step(engine, job, rings, step.size, balancer, shares[-1], sent)
            else:
                progs, check = _step_programs(engine, job, step)
                results = C.run_collective(engine, progs, collective_timeout(job, step.op, step.size),
                                           sent=sent)
                if w.check:
                    wrong += sum(results[task] != want() for task, want in check.items())
            traffic.add(step.op, step.group, sent)
        times.append(engine.clock() - start)
        print(f"# iteration {it}: {times[-1] * 1e3:.1f} ms", file=out, flush=True)
    result: dict[str, Any] = {"iteration_s": times, "traffic": traffic.to_json()}
    if w.check:
        result["trace_wrong"] = wrong
    if split:
        result.update(tp_nvlink_share=shares, tp_split_wrong=split_wrong)
    return result


def _step_programs(engine: Engine, job: Job, step: Step
                   ) -> tuple[dict[C.Task, C.Program], dict[C.Task, Callable[[], bytes]]]:
    """The local ranks' programs for one collective step of a trace, and per task how
    to compute what it must end with (called only when the job checks results)."""
    seed = job.transport.seed
    rings, pairs = _step_layout(job, step)
    progs: dict[C.Task, C.Program] = {}
    check: dict[C.Task, Callable[[], bytes]] = {}
    if pairs:
        everyone = [r.rank for r in job.ranks]
        progs, _ = C.programs_for("sendrecv", engine, everyone, step.size, seed, pairs)
        for rank in progs:
            check[rank] = functools.partial(C.expected, "sendrecv", everyone, rank, step.size, seed, pairs)
        return progs, check
    if _uses_pxn(job, step):
        plan = C.pxn_plan(T.step_groups(step, job.ranks), job.ranks)
        for rank in plan.ranks:
            if rank in engine.local:
                data = C.rank_input(seed, rank, step.size)
                progs[rank] = C.pxn_all_to_all(plan, rank, data, step.weights)
                members = plan.order.get(rank)
                check[rank] = (functools.partial(C.expected, "alltoall", members, rank, step.size, seed,
                                                 weights=step.weights) if members else bytes)
        return progs, check
    for ring in rings:
        part, _ = C.programs_for(step.op, engine, ring, step.size, seed, weights=step.weights)
        progs.update(part)
        for rank in part:
            check[rank] = functools.partial(C.expected, step.op, ring, rank, step.size, seed,
                                            weights=step.weights)
    return progs, check


def _blocks_per_pod(job: Job) -> int | None:
    """The pods of the job's fabric (None: no spec, one pod), for `tccl.traffic`."""
    if not job.fabric:
        return None
    from topo.spec import load_spec
    return load_spec(job.fabric).blocks_per_pod


def _split_step(engine: Engine, job: Job, rings: list[list[int]], size: int,
                balancer: C.SplitBalancer, share: float, sent: dict[tuple[int, int, str], int]) -> int:
    """This server's tp AllReduce split over NVLink and the NICs; updates the balancer
    from each channel's achieved bandwidth. Returns how many ranks got a wrong result."""
    ring = next(r for r in rings if set(r) <= set(engine.local))
    progs, cut = C.split_all_reduce(engine, ring, size, job.transport.seed, share)
    finished: dict[C.Task, float] = {}
    start = engine.clock()
    results = C.run_collective(engine, progs, collective_timeout(job, "allreduce", size), finished, sent)
    for channel, nbytes in ((C.NVLINK, cut), (C.NET, size - cut)):
        done = [f for (rank, ch), f in finished.items() if ch == channel]
        if done:
            # Bytes each rank moves over the channel in a ring AllReduce: the bus factor of its part.
            moved = nbytes * bus_factor("allreduce", len(ring))
            balancer.update(channel, int(moved), max(done) - start, 2 * (len(ring) - 1))
    expect = C.expected("allreduce", ring, ring[0], size, job.transport.seed)
    joined = {rank: results.get((rank, C.NVLINK), b"") + results.get((rank, C.NET), b"") for rank in ring}
    return sum(v != expect for v in joined.values())


def _linger(engine: Engine, job: Job, run_dir: Path, server: str) -> None:
    """Keep serving until the finish barrier is complete: every agent of the job has
    marked itself done, i.e. all the messages it sent are acknowledged, so no agent
    needs an ACK or a retransmission from this one any more. A job whose agents do not
    all get there (one was killed) ends once this agent is idle and no frame arrived
    for a quiet period, or after MAX_LINGER."""
    servers = {r.server for r in job.ranks}
    quiet = QUIET_RTOS * engine.job.transport.rto
    end = engine.clock() + MAX_LINGER
    last_frame = engine.clock()
    while engine.clock() < end:
        if engine.idle():
            done_path(run_dir, server).touch()
            if all(done_path(run_dir, s).exists() for s in servers) or engine.clock() - last_frame >= quiet:
                return
        seen = engine.rx_frames
        engine.run_for(BARRIER_POLL)
        if engine.rx_frames != seen:
            last_frame = engine.clock()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tccl.agent", description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", required=True, help="job file (YAML/JSON), the same for every agent")
    ap.add_argument("--server", required=True, help="this agent's server name in the job")
    ap.add_argument("--run-dir", required=True, help="directory for the control socket and results")
    ap.add_argument("--clock", help=f"the fabric's emulation clock, <origin_ns>:<dilation> "
                                    f"(default: ${CLOCK_ENV}, else a fresh undilated clock)")
    ap.add_argument("--nic", choices=NICS, default="python",
                    help="the RoCE transport: the Python reference or the native NIC in C (tccl/nic)")
    ap.add_argument("--rt-priority", type=int, default=0, metavar="N",
                    help="SCHED_RR priority to run at once set up, before any traffic (default 0: normal)")
    args = ap.parse_args(argv)
    run_dir = Path(args.run_dir)
    try:
        clock = EmulationClock.decode(args.clock, "--clock") if args.clock else EmulationClock.from_env()
        run_dir.mkdir(parents=True, exist_ok=True)
        job = load_job(args.job)
        job.server_ranks(args.server)
        run(job, args.server, run_dir, clock=clock, nic=args.nic, rt_priority=args.rt_priority)
    except (ClockError, JobError, OSError, PortError) as e:
        print(f"tccl agent: {e}", file=sys.stderr)
        return 2
    except C.CollectiveError as e:
        print(f"tccl agent {args.server}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
