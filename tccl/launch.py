"""Run a job's agents on a running fabric: one agent process per server, in its host.

``run_on_fabric(fabric, job, run_dir)`` writes the job file into ``run_dir`` (hosts
share the filesystem), starts every server's agent inside its Mininet host (forked
from the spawner, tccl/spawner.py, as ``python -m tccl.agent`` would run), waits for
all of them and returns their results; on a failure or timeout every
agent still running is terminated by PID. Used by the tests and ``make bench``.
Every agent gets the same emulation clock (``--clock``, as its machine reads it:
``fabric.clock_on``), so their times agree with each other and with the switches'.
"""

from __future__ import annotations

import functools
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from emulation.clock import EmulationClock
from emulation.realtime import agent_priority, setup_niceness, setup_prefix
from tccl.control import socket_path
from tccl.rundir import clear_markers, results_path
from tccl.job import Job
from tccl.spawner import spawner
from topo.namespaces import process_netns
from topo.processes import stop_process
from topo.spec import nic_choice

ROOT = Path(__file__).resolve().parent.parent


class AgentProcess(Protocol):
    """A running agent: `subprocess.Popen`, or the spawner's `tccl.spawner.SpawnedProcess`."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class HostsProvider(Protocol):
    """What the launcher needs from a fabric (topo.net.Fabric has it)."""

    run_dir: Path
    spec: Any                       # the fabric spec: its rt_priority applies to the agents
    clock: EmulationClock | None    # the fabric's emulation clock (None: not started)

    def host(self, name: str) -> Any: ...

    def clock_on(self, node: str) -> EmulationClock: ...


def default_run_dir(fabric: HostsProvider) -> Path:
    """Where agents run unless told otherwise: ``<fabric run dir>/tccl``. GOR finds the
    agents' control sockets there (``tccl.control.socket_path``)."""
    return Path(fabric.run_dir) / "tccl"


class LaunchError(RuntimeError):
    """An agent failed or did not finish; the message carries its output.

    ``failed_ranks`` names the ranks whose agents failed on their own (exited non-zero,
    were killed, or did not finish in time), by server: the job could not complete
    without them, so the other agents were stopped (as mpirun aborts a job whose
    process died) and are not counted as failed."""

    def __init__(self, message: str, failed_ranks: Mapping[str, tuple[int, ...]] | None = None) -> None:
        super().__init__(message)
        self.failed_ranks = dict(failed_ranks or {})


@functools.cache
def _native_nic_error() -> str | None:
    from tccl.nic.build import build_error

    return build_error()


def resolve_nic(spec: Any) -> str:
    """The transport the agents run on fabric ``spec``: `topo.spec.nic_choice` ($ASTRAL_NIC
    over the spec's ``nic``); "auto" is the native NIC when it builds on this machine
    (the fabric's default: the transport in C, as an RNIC's), else the Python reference,
    saying why on stderr."""
    choice = nic_choice(spec)
    if choice != "auto":
        return choice
    error = _native_nic_error()
    if error is None:
        return "native"
    print(f"tccl: the native NIC does not build here ({error}); the agents run the Python transport",
          file=sys.stderr)
    return "python"


def agent_args(fabric: HostsProvider, job_path: Path, server: str, run_dir: Path,
               clock: EmulationClock | None = None, nic: str | None = None) -> list[str]:
    """The arguments of ``server``'s agent (`tccl.agent.main`'s): on the fabric's clock
    as ``server``'s machine reads it (or ``clock``), over transport ``nic`` (default:
    the fabric spec's, `resolve_nic`), entering the agents' real-time priority beside
    the fabric's switches once set up (emulation/realtime.py)."""
    clock = clock or (fabric.clock_on(server) if fabric.clock else EmulationClock.from_env())
    return ["--job", str(job_path), "--server", server, "--run-dir", str(run_dir), "--clock", clock.encode(),
            "--nic", nic or resolve_nic(fabric.spec), "--rt-priority", str(agent_priority(fabric.spec.rt_priority))]


def agent_command(fabric: HostsProvider, job_path: Path, server: str, run_dir: Path,
                  clock: EmulationClock | None = None, nic: str | None = None) -> list[str]:
    """The command line of ``server``'s agent (`agent_args`), set up at niceness -10
    when it enters a real-time priority."""
    return setup_prefix(agent_priority(fabric.spec.rt_priority)) + [
        sys.executable, "-m", "tccl.agent", *agent_args(fabric, job_path, server, run_dir, clock, nic)]


def start_agent(fabric: HostsProvider, job_path: Path, server: str, run_dir: Path,
                clock: EmulationClock | None = None, nic: str | None = None) -> AgentProcess:
    """Start ``server``'s agent, its output in ``agent-<server>.log`` of ``run_dir``. In
    a Mininet host of this machine it is forked from the spawner (tccl/spawner.py: the
    imports done once) into the host's network namespace; elsewhere (a cluster's remote
    host) it is the host's own ``popen`` of `agent_command`."""
    log = run_dir / f"agent-{server}.log"
    host = fabric.host(server)
    if getattr(host, "inNamespace", False) and not getattr(host, "isRemote", False):
        return spawner().spawn(agent_args(fabric, job_path, server, run_dir, clock, nic), log,
                               netns=process_netns(host.pid),
                               nice=setup_niceness(agent_priority(fabric.spec.rt_priority)))
    with open(log, "w", encoding="utf-8") as out:
        return host.popen(agent_command(fabric, job_path, server, run_dir, clock, nic), cwd=str(ROOT),
                          stdout=out, stderr=subprocess.STDOUT)


def run_on_fabric(fabric: HostsProvider, job: Job, run_dir: str | Path | None = None,
                  timeout: float = 120.0,
                  on_started: Callable[[dict[str, int]], None] | None = None,
                  clock: EmulationClock | None = None, nic: str | None = None) -> dict[str, dict[str, Any]]:
    """Run ``job`` on every server of the fabric that has ranks; results by server.

    The agents run on ``clock`` (default: the fabric's, else `EmulationClock.from_env`)
    over transport ``nic`` (default: the fabric spec's); ``timeout`` is emulated seconds. ``on_started`` is given every
    agent's PID by server once all are started (e.g. to measure their CPU while they run).
    """
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(fabric)
    run_dir.mkdir(parents=True, exist_ok=True)
    job_path = run_dir / "job.yaml"
    job.save(job_path)
    return run_jobs(fabric, {job_path: job}, run_dir, timeout, on_started, clock, nic)


def run_jobs(fabric: HostsProvider, jobs: Mapping[Path, Job], run_dir: Path, timeout: float = 120.0,
             on_started: Callable[[dict[str, int]], None] | None = None,
             clock: EmulationClock | None = None, nic: str | None = None) -> dict[str, dict[str, Any]]:
    """Start the agents of every job (its saved file -> the job) at once in ``run_dir``
    and wait for all of them; results by server (`run_on_fabric`'s arguments). The
    jobs must not share a server: agents, their sockets and results are per server.
    Raises LaunchError naming the agents (and their ranks) that failed or did not
    finish in time; the other agents are then stopped."""
    timing = clock or fabric.clock or EmulationClock.from_env()
    by_server = {server: path for path, job in jobs.items() for server in sorted({r.server for r in job.ranks})}
    if len(by_server) != sum(len({r.server for r in job.ranks}) for job in jobs.values()):
        raise ValueError("jobs run together must not share a server (agents are per server)")
    ranks = {server: tuple(r.rank for r in jobs[path].ranks if r.server == server) for server, path in by_server.items()}
    procs: dict[str, AgentProcess] = {}
    for server in by_server:
        clear_markers(run_dir, server)
    try:
        for server, job_path in by_server.items():
            procs[server] = start_agent(fabric, job_path, server, run_dir, clock, nic)
        if on_started is not None:
            on_started({server: proc.pid for server, proc in procs.items()})
        failed = _wait_all(procs, timing.wall_s(timeout))
        if failed:
            names = ", ".join(f"{server} (ranks {', '.join(map(str, ranks[server]))}) {why}"
                              for server, why in failed.items())
            logs = "".join(log.read_text(encoding="utf-8") for log in (run_dir / f"agent-{s}.log" for s in failed)
                           if log.exists())
            raise LaunchError(f"agents failed: {names}; the others were stopped\n{logs}",
                              {server: ranks[server] for server in failed})
    finally:
        for server, proc in procs.items():
            stop_process(proc, 5)
            # An agent killed or stopped by a signal leaves its control socket behind.
            socket_path(run_dir, server).unlink(missing_ok=True)
    return {s: json.loads(results_path(run_dir, s).read_text(encoding="utf-8")) for s in by_server}


def _wait_all(procs: Mapping[str, AgentProcess], wall_s: float) -> dict[str, str]:
    """Wait for every agent; the agents that failed (why, by server), as soon as one
    has: without it the others cannot finish. One waiting thread per agent, so the
    first failure is seen whichever agent it is."""
    done: queue.Queue[str] = queue.Queue()

    def wait(server: str, proc: AgentProcess) -> None:
        proc.wait()
        done.put(server)

    for server, proc in procs.items():
        threading.Thread(target=wait, args=(server, proc), daemon=True).start()
    end = time.monotonic() + wall_s
    finished = 0
    while finished < len(procs):
        try:
            server = done.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            return {s: "did not finish in time" for s, p in procs.items() if p.poll() is None}
        finished += 1
        code = procs[server].returncode
        if code != 0:
            return {server: f"killed by signal {-code}" if code < 0 else f"exited with {code}"}
    return {}


def parse_size(text: str) -> int:
    """``64K`` / ``1M`` / ``4096`` -> bytes (K and M are powers of two, as in nccl-tests)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    try:
        return int(t[:-1]) * units[t[-1]] if t and t[-1] in units else int(t)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (e.g. 4096, 64K, 1M)") from None


def job_from_command(line: str, fabric_spec: str | Path) -> Job:
    """A job over every NIC of a fabric from a one-line command, for interactive
    prompts: ``allreduce 64K,1M --ports orthogonal --order rail --algo tree --iters 3 --nvlink 1``."""
    import argparse
    import shlex

    from tccl.job import ALGOS, OPS, ORDERS, PORT_MODES, Transport, Workload, job_from_fabric

    ap = argparse.ArgumentParser(prog="tccl", add_help=False, exit_on_error=False)
    ap.add_argument("op", choices=OPS)
    ap.add_argument("sizes", type=lambda s: tuple(parse_size(x) for x in s.split(",")))
    ap.add_argument("--ports", choices=PORT_MODES, default="orthogonal")
    ap.add_argument("--order", choices=ORDERS, default="rail")
    ap.add_argument("--algo", choices=ALGOS, default="ring")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nvlink", type=float, default=1.0, help="NVLink Gbit/s (0: off)")
    try:
        args = ap.parse_args(shlex.split(line))
    except (argparse.ArgumentError, SystemExit, ValueError) as e:
        raise ValueError(f"tccl: {e}; usage: {ap.format_usage().strip()}") from None
    return job_from_fabric(fabric_spec, Workload(op=args.op, sizes=args.sizes, iters=args.iters,
                                                 warmup=args.warmup, order=args.order, algo=args.algo),
                           Transport(ports=args.ports, seed=args.seed, nvlink_gbps=args.nvlink),
                           name=f"{args.op}-{args.ports}")
