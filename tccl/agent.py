"""``python -m tccl.agent``: the TCCL agent of one server.

Runs inside the server's network namespace (its Mininet host), opens one raw socket
per rail NIC (one rank each), serves the control channel on a Unix socket in the run
directory, runs the job's workload -- an nccl-tests style sweep of one collective over
message sizes -- prints the table and writes ``results-<server>.json``. It then keeps
answering its peers until they have been quiet for a while, so that a peer whose last
ACK was lost can still finish, and exits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tccl import collectives as C
from tccl import ports as P
from tccl.control import ControlServer, socket_path
from tccl.engine import Engine
from tccl.job import Job, JobError, load_job
from tccl.results import HEADER, Row, format_row, save

# Stop lingering once no frame has arrived for this many retransmission timeouts.
QUIET_RTOS = 4
MAX_LINGER = 30.0
# How long an agent waits for the other agents of the job to open their NICs before it
# starts anyway (go-back-N then recovers what reached a NIC not yet open).
START_BARRIER = 30.0


def ready_path(run_dir: Path, server: str) -> Path:
    """Marker file an agent writes once its NICs are open (the start barrier)."""
    return run_dir / f"ready-{server}"


def _barrier(engine: Engine, job: Job, run_dir: Path) -> None:
    """Wait (serving the control channel) until every server's agent has its NICs open.
    A run directory holds one job: markers are never removed during it."""
    servers = {r.server for r in job.ranks}
    engine.run_until(lambda: all(ready_path(run_dir, s).exists() for s in servers), START_BARRIER)


def workload_flows(job: Job, ring: list[int]) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs that carry the workload's data, all concurrent."""
    w = job.workload
    if w.op == "sendrecv":
        return list(w.pairs)
    if w.op == "alltoall":
        return [(a, b) for a in ring for b in ring if a != b]
    return C.ring_flows(ring)


def port_function(job: Job, ring: list[int]) -> tuple[Callable[[int, int], int], dict[str, int]]:
    """Source port per QP (local rank, peer rank), as the job's port mode plans it.

    Every agent computes the same plan from the same job file, so a flow's port is
    known everywhere (GOR can predict paths) without any exchange.
    """
    t = job.transport
    ranks = {r.rank: r for r in job.ranks}
    flows = [(a, b) for a, b in workload_flows(job, ring)
             if not (t.nvlink_gbps > 0 and ranks[a].server == ranks[b].server)]
    if t.ports == "orthogonal":
        if not job.fabric:
            raise JobError(f"job {job.name!r}: transport.ports: orthogonal needs the job's `fabric` spec")
        from topo.addressing import AddressPlan
        from topo.spec import load_spec
        plan = AddressPlan(load_spec(job.fabric))
        by_ip = P.orthogonal_ports(plan, [(ranks[a].ip, ranks[b].ip) for a, b in flows], t.seed)
        planned = {(a, b): by_ip[(ranks[a].ip, ranks[b].ip)] for a, b in flows}
    else:
        planned = P.random_ports(flows, t.seed)

    def port(local: int, peer: int) -> int:
        if (local, peer) in planned:
            return planned[(local, peer)]
        return P.random_ports([(local, peer)], f"{t.seed}/{local}/{peer}")[(local, peer)]

    return port, {f"{a}->{b}": p for (a, b), p in planned.items()}


def collective_timeout(job: Job, size: int) -> float:
    """A generous bound for one collective: 20x its ideal time at line rate, plus 30 s."""
    n = len(job.ranks)
    factor = 2.0 if job.workload.op == "allreduce" else 1.0 if job.workload.op != "alltoall" else n
    return 30.0 + 20 * factor * size * 8 / job.transport.line_rate_bps


def run(job: Job, server: str, run_dir: Path, out: Any = sys.stdout) -> dict[str, Any]:
    """Run the job's workload for ``server``'s ranks; returns what it saves as JSON."""
    w = job.workload
    ring = C.ring_order(job.ranks, w.order)
    port, planned = port_function(job, ring)
    engine = Engine(job, server, ports=port)
    rows: list[Row] = []
    ready_path(run_dir, server).unlink(missing_ok=True)
    with engine:
        control = ControlServer(engine, socket_path(run_dir, server)).start()
        ready_path(run_dir, server).touch()
        try:
            _barrier(engine, job, run_dir)
            print(f"# tccl agent {server}: {w.op}, {len(ring)} ranks, order {w.order}, "
                  f"ports {job.transport.ports}, local ranks {sorted(engine.local)}", file=out)
            print(HEADER, file=out, flush=True)
            for size in w.sizes:
                times, wrong = [], 0
                for it in range(w.warmup + w.iters):
                    progs, _ = C.programs_for(w.op, engine, ring, size, job.transport.seed, w.pairs)
                    start = time.monotonic()
                    results = C.run_collective(engine, progs, collective_timeout(job, size))
                    if it >= w.warmup:
                        times.append(time.monotonic() - start)
                    if w.check and it == w.warmup + w.iters - 1:
                        wrong = sum(results[r] != C.expected(w.op, ring, r, size, job.transport.seed, w.pairs)
                                    for r in results)
                row = Row.measure(w.op, size, len(ring), statistics.mean(times), wrong if w.check else -1)
                rows.append(row)
                print(format_row(row), file=out, flush=True)
            _linger(engine)
            flows = [{**qp.describe(), "rx": vars(qp.responder.stats), "rx_last_sport": qp.responder.last_sport}
                     for qp in engine.qps.values()]
        finally:
            control.stop()
    meta = {"job": job.name, "server": server, "op": w.op, "order": w.order,
            "ports": job.transport.ports, "ranks": len(ring), "local_ranks": sorted(engine.local),
            "ring": ring, "ring_hops": C.ring_hops(ring, {r.rank: r for r in job.ranks}),
            "planned_ports": planned, "line_mbps": job.transport.line_mbps, "flows": flows,
            "timeline": {"columns": ["t_s", "acked_bytes", "rate_bps", "retransmits", "cnps"],
                         "flows": {str(q): rows for q, rows in engine.timeline.items()}}}
    save(run_dir / f"results-{server}.json", meta, rows)
    return {**meta, "rows": [vars(r) for r in rows]}


def _linger(engine: Engine) -> None:
    """Keep serving until every local QP is idle and peers have gone quiet."""
    quiet = QUIET_RTOS * engine.job.transport.rto
    end = time.monotonic() + MAX_LINGER
    seen = engine.rx_frames
    last_change = time.monotonic()

    def done() -> bool:
        nonlocal seen, last_change
        now = time.monotonic()
        if engine.rx_frames != seen:
            seen, last_change = engine.rx_frames, now
        return (engine.idle() and now - last_change > quiet) or now > end

    engine.run_until(done, MAX_LINGER + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tccl.agent", description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", required=True, help="job file (YAML/JSON), the same for every agent")
    ap.add_argument("--server", required=True, help="this agent's server name in the job")
    ap.add_argument("--run-dir", required=True, help="directory for the control socket and results")
    args = ap.parse_args(argv)
    run_dir = Path(args.run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        job = load_job(args.job)
        job.server_ranks(args.server)
        run(job, args.server, run_dir)
    except (JobError, OSError) as e:
        print(f"tccl agent: {e}", file=sys.stderr)
        return 2
    except C.CollectiveError as e:
        print(f"tccl agent {args.server}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
