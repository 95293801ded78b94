"""Faults injected into a running fabric with GOR and TCCL agents (issue 15 part 2; root,
Mininet): malformed messages on the agents' control sockets mid-job, a leaf's switch
process killed and restarted mid-job, a leaf-spine cable flapping every 100 ms, an
agent killed mid-job. GOR stays up through all of them (one GOR for the module),
re-pushes the restarted switch, and every job completes with every byte right -- or, for
the killed agent, the launcher names exactly the ranks that failed. Every listening
socket the fabric, GOR and the agents open is on loopback or inside the fabric's own
namespaces. Afterwards nothing is left: no process, no interface, no host namespace.

``P4SIM_FUZZ_FLAP_S`` sets how long the cable flaps (3 s here; `make fuzz`: 10 s).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from controller.gor import Gor  # noqa: E402
from emulation.realtime import agent_priority  # noqa: E402
from experiments.gor_loop import SENDER_MBPS, endpoints, two_flow_job  # noqa: E402
from fuzzkit import count  # noqa: E402
from tccl.rundir import ready_path  # noqa: E402
from tccl.control import SERVICE, AgentClient, socket_path  # noqa: E402
from tccl.job import Job  # noqa: E402
from tccl.launch import LaunchError, run_on_fabric  # noqa: E402
from testkit import gor_on, small_fabric, wait_for  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import NICS  # noqa: E402

FLAP_S = float(os.environ.get("P4SIM_FUZZ_FLAP_S", "3"))
FLAP_PERIOD_S = 0.1        # the cable changes state every 100 ms
ITERS = 40                 # 100 KB messages at 6 Mbit/s: ~7 s per job when nothing fails
JOB_TIMEOUT = 150.0        # emulated s: a job that outlives a fault still ends well inside
LOOPBACK = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
TCP_LISTEN, UDP_UNCONNECTED = "0A", "07"     # socket states in /proc/net/{tcp,udp}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory) -> Iterator[Fabric]:
    with small_fabric("faults", "x", tmp_path_factory.mktemp("fabric")) as fab:
        yield fab


@pytest.fixture(scope="module")
def gor(fabric: Fabric, tmp_path_factory) -> Iterator[Gor]:
    """One GOR for every fault of the module: it must survive them all."""
    with gor_on(fabric, tmp_path_factory.mktemp("gor")) as g:
        yield g


def gor_alive(gor: Gor) -> bool:
    return gor._thread is not None and gor._thread.is_alive()


class RunningJob:
    """A job's agents launched by `run_on_fabric` in GOR's agent directory, on a thread."""

    def __init__(self, fabric: Fabric, gor: Gor, job: Job, nic: str | None = None) -> None:
        self.gor, self.job = gor, job
        self.pids: dict[str, int] = {}
        started = threading.Event()

        def on_started(pids: dict[str, int]) -> None:
            self.pids.update(pids)
            started.set()

        self._pool = ThreadPoolExecutor(max_workers=1)
        self.future: Future = self._pool.submit(run_on_fabric, fabric, job, gor.agent_dir, JOB_TIMEOUT, on_started,
                                                nic=nic)
        wait_for("the agents to start", lambda: started.is_set() or self.future.done(), 60)
        self._pool.shutdown(wait=False)
        self.servers = sorted({r.server for r in job.ranks})

    def sending(self) -> None:
        """Wait until the job runs: every agent past the start barrier and bytes acknowledged."""
        run_dir = self.gor.agent_dir
        wait_for("every agent's NICs open", lambda: all(ready_path(run_dir, s).exists() for s in self.servers)
                 or self.future.done(), 60)

        def acked() -> bool:
            with AgentClient(socket_path(run_dir, self.servers[0]), timeout=5) as client:
                try:
                    return any(f.acked_bytes > 0 for f in client.list_flows())
                except grpc.RpcError:
                    return False        # its control socket is not up yet
        wait_for("the job's first acknowledged bytes", lambda: self.future.done() or acked(), 60)
        assert not self.future.done(), f"the job ended before the fault: {self.future.exception()}"

    def completed(self) -> dict[str, Any]:
        """The job's results once every agent succeeded, with every byte right."""
        results = self.future.result(timeout=JOB_TIMEOUT * 2)
        for server, result in results.items():
            assert all(row["wrong"] in (0, -1) for row in result["rows"]), (server, result["rows"])
        return results


def job(fabric: Fabric, name: str, iters: int = ITERS) -> Job:
    return two_flow_job(fabric.plan, (0, 1), iters, SENDER_MBPS, name)[0]


# -- listening sockets ------------------------------------------------------------------------

def _address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/{tcp,udp}[6] print it (32-bit words in host byte order);
    an IPv4-mapped IPv6 address (gRPC's sockets are dual-stack) as its IPv4 address."""
    raw = bytes.fromhex(hex_addr)
    addr = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
    return getattr(addr, "ipv4_mapped", None) or addr


def listening(pid: int) -> list[tuple[str, str, int, str]]:
    """The TCP sockets listening and the UDP sockets bound unconnected of process ``pid``:
    (protocol, address, port, network namespace). /proc/<pid>/net shows every socket
    of the process's namespace; the process's own are those its descriptors hold."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue        # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    netns = os.readlink(f"/proc/{pid}/ns/net")
    out = []
    for proto, state in (("tcp", TCP_LISTEN), ("tcp6", TCP_LISTEN), ("udp", UDP_UNCONNECTED), ("udp6", UDP_UNCONNECTED)):
        for line in Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == state and fields[9] in inodes:
                addr, port = fields[1].split(":")
                out.append((proto, str(_address(addr)), int(port, 16), netns))
    return out


def scheduling(pid: int) -> dict[int, tuple[int, int]]:
    """Every thread of process ``pid``: its scheduling policy and priority."""
    out = {}
    for tid in map(int, os.listdir(f"/proc/{pid}/task")):
        try:
            out[tid] = (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority)
        except ProcessLookupError:
            continue        # ended meanwhile
    return out


@pytest.mark.parametrize("nic", NICS)
def test_listening_sockets_are_on_loopback_or_in_the_fabric_and_agents_take_garbage(fabric: Fabric, gor: Gor,
                                                                                    nic: str) -> None:
    """All listening sockets of the switches, GOR (this process) and a running job's
    agents (on each transport); meanwhile each agent's control socket gets garbage, and
    the job completes. The sending agents run real-time (set up before that,
    emulation/realtime.py): every thread SCHED_RR, a native NIC's threads above the
    library's."""
    running = RunningJob(fabric, gor, job(fabric, "sockets"), nic)
    running.sending()
    top = agent_priority(fabric.spec.rt_priority)
    for server, pid in running.pids.items():
        threads = scheduling(pid)
        assert {policy for policy, _ in threads.values()} == {os.SCHED_RR}, (server, threads)
        library = top - 1 if nic == "native" else top
        assert threads[pid][1] == library and max(p for _, p in threads.values()) == top, (server, threads)
    own = os.readlink("/proc/self/ns/net")
    hosts = {os.readlink(f"/proc/{fabric.host(s.name).pid}/ns/net") for s in fabric.plan.servers}
    assert fabric.net is not None
    pids = {f"switch {sw.name} ({pid})": pid for sw in fabric.net.switches for pid in sw.pids()}
    pids.update({f"agent {server}": pid for server, pid in running.pids.items()})
    pids["GOR (this process)"] = os.getpid()
    seen = {}
    for who, pid in pids.items():
        for proto, addr, port, netns in listening(pid):
            seen[(who, proto, addr, port)] = netns
            in_fabric = netns != own and netns in hosts
            assert ipaddress.ip_address(addr) in LOOPBACK or in_fabric, \
                f"{who} (pid {pid}) listens on {proto} {addr}:{port} in {'the root namespace' if netns == own else netns}"
    # The switches' P4Runtime servers are among them, on loopback.
    assert sum(1 for who, proto, addr, _ in seen if who.startswith("switch") and addr == "127.0.0.1") >= len(fabric.plan.switches)
    # Malformed control messages while the job runs: refused, and the job goes on.
    for server in running.servers:
        with grpc.insecure_channel(f"unix:{socket_path(gor.agent_dir, server)}") as channel:
            for data in (b"\xff" * 7, bytes(range(64)), b"\x0a\x02\x08"):
                for method in ("SetSourcePort", "ListFlows", "GetStats"):
                    count("control_fuzzed")
                    with pytest.raises(grpc.RpcError) as exc:
                        channel.unary_unary(f"/{SERVICE}/{method}")(data, timeout=10)
                    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value
    running.completed()
    assert gor_alive(gor)


# -- faults -------------------------------------------------------------------------------------

def test_a_switch_killed_and_restarted_mid_job_is_re_pushed_and_the_job_completes(fabric: Fabric, gor: Gor) -> None:
    count("faults_injected")
    plan = fabric.plan
    leaf = plan.switch(endpoints(plan)[0].leaf).name       # the senders' leaf
    running = RunningJob(fabric, gor, job(fabric, "switchkill"))
    running.sending()
    node = fabric.net.get(leaf)
    pushes = gor.fleet.pushes[leaf]
    os.kill(node.process.pid, signal.SIGKILL)
    wait_for("GOR to see the switch gone", lambda: not gor.fleet.is_up(leaf), 30)
    node.stop(deleteIntfs=False)
    node.start([])
    type(node).batchStartup([node])
    wait_for("GOR's re-push of the restarted switch", lambda: gor.fleet.pushes[leaf] > pushes, 60)
    running.completed()
    assert gor_alive(gor) and all(gor.fleet.is_up(sw.name) for sw in plan.switches)
    count("faults_survived")


def flap(intf: str, seconds: float, stop: threading.Event) -> int:
    """Take ``intf`` (a switch port, in the root namespace) down and up every
    `FLAP_PERIOD_S` for ``seconds``; leaves it up. Returns the state changes made."""
    changes = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end and not stop.is_set():
            state = "down" if changes % 2 == 0 else "up"
            subprocess.run(["ip", "link", "set", intf, state], check=True, capture_output=True)
            changes += 1
            stop.wait(FLAP_PERIOD_S)        # the fault's own schedule, not a wait for a result
    finally:
        subprocess.run(["ip", "link", "set", intf, "up"], check=True, capture_output=True)
    return changes


def test_a_cable_flapping_every_100_ms_leaves_gor_up_and_the_job_completes(fabric: Fabric, gor: Gor) -> None:
    count("faults_injected")
    plan = fabric.plan
    leaf = plan.switch(endpoints(plan)[0].leaf)
    intf = plan.intf(leaf.name, plan.uplink_port(0))
    iters = ITERS * max(1, round(FLAP_S / 3))       # the job outlasts the flapping
    running = RunningJob(fabric, gor, job(fabric, "flap", iters))
    running.sending()
    repairs = sum(1 for e in gor.events.snapshot() if e["event"] == "repaired")
    stop = threading.Event()
    try:
        changes = flap(intf, FLAP_S, stop)
    finally:
        stop.set()
    count("faults_flaps", changes)
    assert changes >= FLAP_S / FLAP_PERIOD_S / 2, changes    # it flapped (a slow machine flaps slower)
    running.completed()
    wait_for("the cable back in service", lambda: not gor.down, 10)
    assert gor_alive(gor)
    assert sum(1 for e in gor.events.snapshot() if e["event"] == "repaired") > repairs, "GOR never routed around it"
    count("faults_survived")


@pytest.mark.parametrize("nic", NICS)
def test_an_agent_killed_mid_job_is_reported_with_its_ranks(fabric: Fabric, gor: Gor, nic: str) -> None:
    count("faults_injected")
    j = job(fabric, "agentkill")
    running = RunningJob(fabric, gor, j, nic)
    running.sending()
    victim = running.servers[-1]
    os.kill(running.pids[victim], signal.SIGKILL)
    with pytest.raises(LaunchError) as exc:
        running.future.result(timeout=JOB_TIMEOUT)
    assert exc.value.failed_ranks == {victim: tuple(r.rank for r in j.ranks if r.server == victim)}, exc.value
    assert "killed by signal 9" in str(exc.value)
    for server, pid in running.pids.items():
        assert not Path(f"/proc/{pid}").exists(), f"agent {server} (pid {pid}) still running"
    assert gor_alive(gor)
    count("faults_survived")


def test_nothing_is_left_running(fabric: Fabric, gor: Gor) -> None:
    """GOR and the fabric stopped (their fixtures stop them again, harmlessly): no switch
    or host process, no interface of the fabric, no agent socket."""
    assert fabric.net is not None
    pids = [pid for sw in fabric.net.switches for pid in sw.pids()] + [fabric.host(s.name).pid for s in fabric.plan.servers]
    prefix = fabric.spec.node_prefix
    gor.stop()
    fabric.stop()
    left = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    left += [i for i in os.listdir("/sys/class/net") if i.startswith(prefix)]
    left += [p.name for p in gor.agent_dir.glob("*.sock")]
    count("left_running", len(left))
    assert not left, left
