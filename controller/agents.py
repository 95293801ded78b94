"""GOR's side of the TCCL agents: their control channels, and jobs started on them.

Every agent serves ``tccl.Agent`` on ``<run dir>/tccl-<server>.sock``
(`tccl.control.socket_path`); `AgentDirectory` finds the live ones, lists their flows
and asks the agent owning a flow to change its source port. `JobRunner` starts a job's
agents inside the fabric's Mininet hosts without waiting for them (the REPL's ``job``
command), keeps their output in ``agent-<server>.log`` and ends them by PID.
"""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tccl.control import AgentClient, socket_path
from tccl.rundir import clear_markers, ready_path
from tccl.job import Job
from tccl.launch import AgentProcess, start_agent
from topo.addressing import AddressPlan

# How often `JobRunner.wait_started` looks for the agents' ready markers (wall s).
START_POLL_S = 0.05
# An agent that does not answer a flow listing in this time is skipped this round.
LIST_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class AgentFlow:
    """A flow as its agent reports it."""

    server: str
    qpn: int
    src: str
    dst: str
    sport: int
    dport: int
    bytes: int
    rate_bps: float
    state: str
    created_ns: int = 0     # when the agent created the QP: a new job's QP has a new one


class AgentDirectory:
    """The control channels of the agents of one fabric's run directory."""

    def __init__(self, plan: AddressPlan, run_dir: str | Path) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir)
        self._clients: dict[str, AgentClient] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(plan.servers)), thread_name_prefix="gor-list")

    def _client(self, server: str, timeout: float) -> AgentClient | None:
        path = socket_path(self.run_dir, server)
        if not path.exists():
            return None
        with self._lock:
            if server not in self._clients:
                self._clients[server] = AgentClient(path, timeout=timeout)
            return self._clients[server]

    def flows(self) -> tuple[set[str], list[AgentFlow]]:
        """The servers whose agents answered now, and all their flows. The agents are
        asked all at once: a listing takes as long as the slowest agent (at most
        `LIST_TIMEOUT_S`), not the sum of them -- one after the other, busy agents held
        GOR's loop for seconds."""
        clients = {s.name: c for s in self.plan.servers if (c := self._client(s.name, LIST_TIMEOUT_S)) is not None}
        answered, out = set(), []
        for server, flows in zip(clients, self._pool.map(self._list, clients.values())):
            if flows is None:
                continue
            answered.add(server)
            out += [AgentFlow(server, f.qpn, f.src_ip, f.dst_ip, f.sport, f.dport, f.bytes,
                              f.rate_bps, f.state, f.created_ns) for f in flows]
        return answered, out

    @staticmethod
    def _list(client: AgentClient) -> list[Any] | None:
        """One agent's flows, or None if it did not answer."""
        try:
            return list(client.list_flows())
        except grpc.RpcError:
            return None

    def set_source_port(self, server: str, qpn: int, sport: int, timeout_s: float) -> Any:
        """Ask ``server``'s agent to move flow ``qpn`` to ``sport`` at its next message
        boundary; returns the agent's reply once the flow uses it. Raises RuntimeError
        naming the agent when it is not there or refuses."""
        client = self._client(server, timeout_s + 5)
        if client is None:
            raise RuntimeError(f"no agent of {server} (no {socket_path(self.run_dir, server)})")
        try:
            return client.set_source_port(sport, qpn=qpn, timeout_s=timeout_s)
        except grpc.RpcError as e:
            raise RuntimeError(f"agent {server}: {e.code().name}: {e.details()}") from e

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


@dataclass
class JobRun:
    """The agent processes of one job started from GOR."""

    name: str
    path: Path
    procs: dict[str, AgentProcess] = field(default_factory=dict)

    def status(self) -> dict[str, str]:
        return {s: ("running" if p.poll() is None else f"exit {p.returncode}") for s, p in self.procs.items()}


class JobRunner:
    """Starts jobs' agents in the fabric's hosts; `stop_all` ends them by PID."""

    def __init__(self, fabric: Any, run_dir: str | Path) -> None:
        self.fabric = fabric
        self.run_dir = Path(run_dir)
        self.jobs: list[JobRun] = []

    def start(self, job: Job) -> JobRun:
        """Start one agent per server of ``job`` (output in agent-<server>.log)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / f"job-{job.name}.yaml"
        job.save(path)
        run = JobRun(job.name, path)
        for server in sorted({r.server for r in job.ranks}):
            clear_markers(self.run_dir, server)
        for server in sorted({r.server for r in job.ranks}):
            run.procs[server] = start_agent(self.fabric, path, server, self.run_dir)
        self.jobs.append(run)
        return run

    def wait_started(self, run: JobRun, timeout_s: float) -> dict[str, str]:
        """Wait until every agent of ``run`` is set up (its ready marker: NICs open, at
        the job's start barrier) or has exited, or ``timeout_s`` (wall) passed; the
        servers whose agents are not up, with why (``exit N``, ``starting``). An agent
        sets up before it is real-time (emulation/realtime.py), which on a busy machine
        takes seconds: a prompt that returned at once showed a job not sending yet."""
        deadline = time.monotonic() + timeout_s
        while True:
            late = {s: "starting" if p.poll() is None else f"exit {p.returncode}"
                    for s, p in run.procs.items() if not ready_path(self.run_dir, s).exists()}
            if "starting" not in late.values() or time.monotonic() > deadline:
                return late
            time.sleep(START_POLL_S)

    def stop_all(self) -> None:
        for run in self.jobs:
            for proc in run.procs.values():
                if proc.poll() is None:
                    proc.terminate()
            for proc in run.procs.values():
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
