"""CPU time the fabric's processes use while a job runs (for benchmarks).

The figure that says whether the emulation has headroom is CPU seconds of the agents and
switches per wall second of a job at line rate: a process off the CPU delays packets the
modelled links would not. `job_cpu` runs a job on a running fabric and measures that
over a window inside the workload -- after every agent has opened its NICs (their
imports and start-up are not the job) and a settling time, before any agent has
finished -- from ``/proc/<pid>/stat`` (utime + stime of every thread), so it needs no
cooperation from the processes measured.

On a busy machine the job runs below line rate and its processes get less CPU, so the
window also counts the bytes the hosts put on their links (the switch side's kernel
counters): ``load`` is that against every NIC at line rate *in emulated time* (a fabric
at dilation d sends line rate in 1/d of the bytes per wall second), and the
``*_at_line_rate`` figures scale the CPU by it -- CPU per wall second while the fabric,
at its dilation, runs every NIC at line rate: the headroom the fabric leaves, which is
what compares between runs on a machine that other work shares.

    fabric.start()
    use = job_cpu(fabric, line_rate_job(spec_file))
    use.agents_per_s, use.switches_per_s, use.load
    use.fabric_frac_at_line_rate     # agents + switches, of all the machine's cores

`agent_pair_cpu` measures the agents alone: two of them joined by veth pairs (one per
rail), streaming to each other at line rate, CPU microseconds per frame sent.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tccl.control import socket_path
from tccl.job import Job, RankInfo, Transport, Workload, job_from_fabric
from tccl.launch import ROOT, default_run_dir, run_on_fabric
from tccl.rundir import ready_path, results_path
from tccl.trace import link_scale
from topo.namespaces import Netns
from topo.processes import stop_process
from topo.spec import load_spec

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Agents need about a second after opening their NICs before every rank sends (the
# start barrier, the first collective's set-up); the window starts after that.
SETTLE_S = 2.0
WINDOW_S = 5.0
# /proc is read this often while waiting for the window's start and end.
POLL_S = 0.05


def cpu_seconds(pids: Iterable[int]) -> float:
    """utime + stime of processes ``pids`` (all their threads), in seconds. A process
    that has ended counts 0, so read it while it runs."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = text.rsplit(")", 1)[1].split()   # the command name may hold spaces
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def wakeups(pids: Iterable[int]) -> int:
    """Voluntary context switches of all the processes' threads: how often they went to
    sleep and were woken. Every thread, because a native switch's packet loop runs on a
    thread of its own (the main thread only waits for signals): counting main threads
    alone gave native switches 0. Unlike CPU time it does not depend on what else the
    machine runs."""
    total = 0
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                text = status.read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue   # the thread ended meanwhile
            total += int(text.split("voluntary_ctxt_switches:", 1)[1].split()[0])
    return total


def switch_pids(fabric: Any) -> list[int]:
    """PIDs of a running `topo.net.Fabric`'s switch processes, each once (with
    ``switch_process: shared`` every switch node's member and the one shared process)."""
    return sorted({pid for sw in fabric.net.switches for pid in sw.pids()})


def host_link_bytes(fabric: Any) -> int:
    """Bytes every host has sent so far: the receive counters of the switch ends of
    the host links (switches live in the root namespace, so /sys shows them)."""
    hosts = set(fabric.net.hosts)
    total = 0
    for link in fabric.net.links:
        for near, far in ((link.intf1, link.intf2), (link.intf2, link.intf1)):
            if far.node in hosts and near.node not in hosts:
                total += int(Path(f"/sys/class/net/{near.name}/statistics/rx_bytes").read_text())
    return total


@dataclass
class JobCpu:
    """CPU used over ``window_s`` wall seconds inside a job, the share of the NICs'
    line rate (in emulated time) the hosts sent meanwhile (``load``), the fabric's
    dilation, and the job's results."""

    window_s: float
    agents_cpu_s: float
    switches_cpu_s: float
    load: float
    agents_wakeups: int
    switches_wakeups: int
    dilation: float
    results: dict[str, dict[str, Any]] = field(repr=False)

    @property
    def agents_per_s(self) -> float:
        return self.agents_cpu_s / self.window_s

    @property
    def switches_per_s(self) -> float:
        return self.switches_cpu_s / self.window_s

    @property
    def fabric_frac(self) -> float:
        """Agents and switches together, as a fraction of all the machine's cores."""
        return (self.agents_per_s + self.switches_per_s) / (os.cpu_count() or 1)

    @property
    def agents_at_line_rate(self) -> float:
        """Agents' CPU seconds per second of every NIC sending at line rate."""
        return self.agents_per_s / self.load

    @property
    def switches_at_line_rate(self) -> float:
        return self.switches_per_s / self.load

    @property
    def fabric_frac_at_line_rate(self) -> float:
        return self.fabric_frac / self.load

    @property
    def agents_wakeups_at_line_rate(self) -> float:
        """The agents' wake-ups per second of every NIC sending at line rate."""
        return self.agents_wakeups / self.window_s / self.load

    @property
    def switches_wakeups_at_line_rate(self) -> float:
        """The switches' wake-ups per second of every NIC sending at line rate."""
        return self.switches_wakeups / self.window_s / self.load


class WindowError(RuntimeError):
    """The job ended (or failed) before the measurement window closed."""


def job_cpu(fabric: Any, job: Job, run_dir: str | Path | None = None, settle_s: float = SETTLE_S,
            window_s: float = WINDOW_S, timeout: float = 600.0, nic: str | None = None) -> JobCpu:
    """Run ``job`` on the running ``fabric`` (agents on transport ``nic``, default the
    spec's) and measure its processes' CPU over ``window_s`` seconds, ``settle_s`` after
    every agent opened its NICs. The job must last longer than that (`WindowError`
    otherwise)."""
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(fabric)
    agents: dict[str, int] = {}
    started = threading.Event()
    outcome: dict[str, Any] = {}

    def on_started(pids: dict[str, int]) -> None:
        agents.update(pids)
        started.set()

    def run() -> None:
        try:
            outcome["results"] = run_on_fabric(fabric, job, run_dir, timeout=timeout, on_started=on_started,
                                               nic=nic)
        except BaseException as e:      # re-raised in the measuring thread
            outcome["error"] = e

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    servers = {r.server for r in job.ranks}

    def wait_until(predicate: Any, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not predicate():
            if not runner.is_alive():
                raise WindowError("the job ended before the measurement window closed") \
                    from outcome.get("error")
            if time.monotonic() > end:
                raise WindowError(f"timed out after {seconds:.0f}s waiting for the job")
            time.sleep(POLL_S)

    wait_until(started.is_set, timeout)
    wait_until(lambda: all(ready_path(run_dir, s).exists() for s in servers), timeout)
    time.sleep(settle_s)
    switches = switch_pids(fabric)
    w0, sw0 = wakeups(agents.values()), wakeups(switches)
    t0, a0, s0, b0 = time.monotonic(), cpu_seconds(agents.values()), cpu_seconds(switches), host_link_bytes(fabric)
    time.sleep(window_s)
    t1, a1, s1, b1 = time.monotonic(), cpu_seconds(agents.values()), cpu_seconds(switches), host_link_bytes(fabric)
    w1, sw1 = wakeups(agents.values()), wakeups(switches)
    if any(results_path(run_dir, s).exists() for s in servers) or not runner.is_alive():
        raise WindowError(f"an agent finished inside the window; give the job more work "
                          f"than {settle_s + window_s:.0f}s")
    runner.join(timeout)
    if "error" in outcome:
        raise outcome["error"]
    dilation = fabric.clock.dilation
    line_bytes = len(job.ranks) * job.transport.line_rate_bps / 8 * (t1 - t0) / dilation
    return JobCpu(t1 - t0, a1 - a0, s1 - s0, (b1 - b0) / line_bytes, w1 - w0, sw1 - sw0, dilation,
                  outcome["results"])


def line_rate_job(spec_file: str | Path, size: int = 1 << 20, iters: int = 6) -> Job:
    """A ring AllReduce over every NIC of the fabric at line rate: rail order and
    hash-orthogonal ports (no two flows share a link), no NVLink (every rank's
    neighbours are reached through its NIC), results unchecked (checking is the
    agents' CPU, not the network's). ``size`` is stated for 10 Mbit/s links and restated
    for the fabric's (`tccl.trace.link_scale`), so the job lasts as long in emulated
    time at any rate: ~9 s at 6 iterations, past `job_cpu`'s settle time and window."""
    size = int(size * link_scale(load_spec(spec_file).links.host_mbps))
    return job_from_fabric(spec_file, Workload(op="allreduce", sizes=(size,), iters=iters, warmup=0,
                                               order="rail", check=False),
                           Transport(ports="orthogonal", nvlink_gbps=0.0), name="cpu-line-rate")


def nic_counters(pid: int, iface: str) -> tuple[int, int]:
    """(bytes, packets) interface ``iface`` has sent, in the namespace of process ``pid``."""
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, numbers = line.partition(":")
        if name.strip() == iface:
            fields = numbers.split()
            return int(fields[8]), int(fields[9])
    raise KeyError(f"no interface {iface} in the namespace of process {pid}")


def agent_pair_cpu(rails: int = 1, duplex: bool = False, size: int = 8 << 20, line_mbps: float = 10.0,
                   mtu: int = 1024, settle_s: float = 1.5, window_s: float = 2.0,
                   nic: str = "python") -> dict[str, float]:
    """Agents a and b on transport ``nic``, ``rails`` NICs each, rail k of a joined to
    rail k of b by a veth pair (no switch, nothing else in the way): a's NICs send
    ``size`` bytes each to b's (and b's to a's too if ``duplex``, as every NIC of a ring
    does). Over ``window_s`` seconds inside the transfer: the two agents' CPU
    microseconds per data frame sent (``agent_pair_cpu_us_per_frame``) and nanoseconds
    per bit sent (``agent_pair_cpu_ns_per_bit``: at dilation 1 emulated bits are wire
    bits), the share of the line rate the sending NICs sent at (``agent_pair_load``),
    and the agents' wake-ups per frame."""
    if size * 8 / (line_mbps * 1e6) < 1.5 * (settle_s + window_s):
        raise ValueError(f"{size} bytes at {line_mbps} Mbit/s end before the window does; send more")
    with Netns() as net, tempfile.TemporaryDirectory(prefix="cpu-pair-") as tmp:
        net.add_ns("a")
        net.add_ns("b")
        ranks: list[RankInfo] = []
        for rail in range(rails):
            ifaces = net.add_link("a", "b", mtu=9000)
            macs = [f"02:00:0a:{rail:02x}:00:0{k + 1}" for k in range(2)]
            ips = [f"10.9.{rail}.{k + 1}" for k in range(2)]
            for k, ns in enumerate("ab"):
                net.run(ns, "ip", "link", "set", ifaces[k], "address", macs[k])
                net.run(ns, "ip", "addr", "add", f"{ips[k]}/24", "dev", ifaces[k])
                ranks.append(RankInfo(len(ranks), ns, 0, rail, ifaces[k], ips[k], macs[k], macs[1 - k]))
        ranks = [dataclasses.replace(r, rank=k) for k, r in enumerate(sorted(ranks, key=lambda r: (r.server, r.rail)))]
        pairs = [(r, r + rails) for r in range(rails)] + ([(r + rails, r) for r in range(rails)] if duplex else [])
        job = Job(ranks=tuple(ranks), transport=Transport(line_mbps=line_mbps, mtu=mtu),
                  workload=Workload(op="sendrecv", sizes=(size,), iters=1, warmup=0, check=False,
                                    pairs=tuple(pairs)), name="pair")
        run_dir = Path(tmp)
        job.save(run_dir / "job.yaml")
        procs: dict[str, subprocess.Popen] = {}
        senders = [(r.server, r.iface) for r in ranks if duplex or r.server == "a"]
        try:
            for ns in "ba":     # the receiver first: the sender starts at once
                procs[ns] = subprocess.Popen(
                    [*net.exec_prefix(ns), sys.executable, "-m", "tccl.agent", "--job", str(run_dir / "job.yaml"),
                     "--server", ns, "--run-dir", str(run_dir), "--nic", nic],
                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                end = time.monotonic() + 60
                while not socket_path(run_dir, ns).exists():
                    if procs[ns].poll() is not None or time.monotonic() > end:
                        raise WindowError(f"agent {ns} did not come up")
                    time.sleep(POLL_S)
            time.sleep(settle_s)
            pids = [p.pid for p in procs.values()]

            def sent() -> tuple[int, int]:
                counts = [nic_counters(procs[ns].pid, iface) for ns, iface in senders]
                return sum(c[0] for c in counts), sum(c[1] for c in counts)

            w0, t0, c0, (b0, f0) = wakeups(pids), time.monotonic(), cpu_seconds(pids), sent()
            time.sleep(window_s)
            t1, c1, (b1, f1), w1 = time.monotonic(), cpu_seconds(pids), sent(), wakeups(pids)
            if any(p.poll() is not None for p in procs.values()) or (run_dir / "results-a.json").exists():
                raise WindowError(f"the transfer ended inside the window: send more than {size} bytes")
        finally:
            for p in procs.values():
                stop_process(p, 5)
    return {"agent_pair_cpu_us_per_frame": (c1 - c0) / (f1 - f0) * 1e6,
            "agent_pair_cpu_ns_per_bit": (c1 - c0) / ((b1 - b0) * 8) * 1e9,
            "agent_pair_wakeups_per_frame": (w1 - w0) / (f1 - f0),
            "agent_pair_load": (b1 - b0) * 8 / (t1 - t0) / (line_mbps * 1e6 * len(senders))}
