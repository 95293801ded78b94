"""Agents as real processes in network namespaces joined by veth pairs (forked by the
spawner, as the launcher starts them in Mininet hosts).

* two namespaces, one veth: a message arrives complete and in order;
* the same with a tbf rate limiter below the agents' line rate: tail drops, and
  go-back-N recovers every byte;
* three namespaces with a CE-marking forwarder in the middle (a userspace stand-in for
  a switch's ECN marking, since no marking qdisc exists on this machine): the receiver
  answers with CNPs, at most one per CNP interval, and the sender cuts its rate;
* the control channel: listing flows, clear errors, and a source-port change in the
  middle of a transfer that shows up on the wire without losing a byte.

Every process is started here and terminated by PID; namespaces are always removed.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import grpc
import pytest

from emulation.clock import EmulationClock
from emulation.host import cpu_ticks
from netns import receive
from p4sim.switch.ports import PortError
from tccl import roce
from tccl.control import AgentClient, socket_path
from tccl.engine import Engine
from tccl.job import Job, RankInfo, Transport, Workload, qpn
from tccl.launch import AgentProcess
from tccl.spawner import spawner
from testkit import again_if_stolen, agents_run, wait_for
from topo.namespaces import Netns, named_netns
from topo.spec import NICS
from topo.processes import stop_process

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

MAC_A, MAC_B = "02:00:0a:00:00:01", "02:00:0a:00:00:02"
IP_A, IP_B = "10.9.0.1", "10.9.0.2"


def make_job(iface_a: str, iface_b: str, size: int, iters: int = 1, warmup: int = 0,
             **transport) -> Job:
    ranks = (RankInfo(0, "a", 0, 0, iface_a, IP_A, MAC_A, MAC_B),
             RankInfo(1, "b", 0, 0, iface_b, IP_B, MAC_B, MAC_A))
    # MTU 1024 unless a test says otherwise: the veths here carry 1500-byte frames.
    return Job(ranks=ranks, transport=Transport(**{"line_mbps": 20.0, "mtu": 1024, **transport}),
               workload=Workload(op="sendrecv", sizes=(size,), iters=iters, warmup=warmup), name="veth")


def configure(net: Netns, ns: str, iface: str, mac: str, ip: str) -> None:
    net.run(ns, "ip", "link", "set", iface, "address", mac)
    net.run(ns, "ip", "addr", "add", f"{ip}/24", "dev", iface)


class Agents:
    """Start agents inside namespaces as the launcher starts them in Mininet hosts
    (forked by the spawner, tccl/spawner.py); always terminate them by PID."""

    def __init__(self, net: Netns, job: Job, tmp: Path, clock: EmulationClock | None = None,
                 nic: str = "python") -> None:
        self.net, self.tmp = net, tmp
        self.clock, self.nic = clock, nic
        self.job_path = tmp / "job.yaml"
        job.save(self.job_path)
        self.procs: dict[str, AgentProcess] = {}

    def log(self, server: str) -> str:
        path = self.tmp / f"agent-{server}.log"
        return path.read_text() if path.exists() else ""

    def start(self, server: str, ns: str) -> None:
        args = ["--job", str(self.job_path), "--server", server, "--run-dir", str(self.tmp), "--nic", self.nic]
        if self.clock is not None:
            args += ["--clock", self.clock.encode()]
        self.procs[server] = spawner().spawn(args, self.tmp / f"agent-{server}.log",
                                             netns=named_netns(self.net.name(ns)))

    def start_ready(self, server: str, ns: str, timeout: float = 20.0) -> None:
        """Start an agent and wait until its NICs are open (its control socket exists)."""
        self.start(server, ns)
        path = socket_path(self.tmp, server)
        end = time.monotonic() + timeout
        while not path.exists():
            if self.procs[server].poll() is not None or time.monotonic() > end:
                pytest.fail(f"agent {server} did not come up:\n{self.log(server)}")
            time.sleep(0.02)

    def wait(self, timeout: float) -> dict[str, dict]:
        end = time.monotonic() + timeout
        for server, proc in self.procs.items():
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"agent {server} did not finish in {timeout}s")
            assert proc.returncode == 0, f"agent {server} failed:\n{self.log(server)}"
        return {s: json.loads((self.tmp / f"results-{s}.json").read_text()) for s in self.procs}

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc, 5)

    def a_to_b(self, timeout: float) -> dict[str, dict]:
        """Receiver b first, then sender a; their results (every agent stopped)."""
        try:
            self.start_ready("b", "b")
            self.start("a", "a")
            return self.wait(timeout)
        finally:
            self.stop()


def two_hosts(net: Netns, mtu: int = 1500) -> tuple[str, str]:
    net.add_ns("a")
    net.add_ns("b")
    ia, ib = net.add_link("a", "b", mtu=mtu)
    configure(net, "a", ia, MAC_A, IP_A)
    configure(net, "b", ib, MAC_B, IP_B)
    return ia, ib


def wait_acked(client: AgentClient, nbytes: int, timeout: float = 20) -> None:
    """Until one of the agent's flows has more than ``nbytes`` acknowledged."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(f.acked_bytes > nbytes for f in client.list_flows()):
        time.sleep(0.02)


def ten_messages(tmp_path: Path, disturb, nic: str = "python") -> dict[str, dict]:
    """a sends b ten messages of 100 KB over transport ``nic``; ``disturb(net, a's iface,
    agents, a's control client)`` runs once both are up. The agents' results."""
    with Netns() as net:
        ia, ib = two_hosts(net)
        agents = Agents(net, make_job(ia, ib, 100_000, iters=10), tmp_path, nic=nic)
        try:
            agents.start_ready("b", "b")
            agents.start_ready("a", "a")
            with AgentClient(socket_path(tmp_path, "a")) as client:
                disturb(net, ia, agents, client)
            return agents.wait(60)
        finally:
            agents.stop()


def flow(result: dict, local: int, peer: int) -> dict:
    return next(f for f in result["flows"] if f["qpn"] == qpn(local, peer))


@pytest.mark.parametrize("nic", NICS)
def test_message_arrives_complete_and_in_order(tmp_path, nic):
    attempts = itertools.count()

    def measure(dilation: float = 1.0) -> tuple[dict, dict[str, int], float]:
        since, run_dir = cpu_ticks(), tmp_path / f"run{next(attempts)}"
        run_dir.mkdir()
        with Netns() as net:
            ia, ib = two_hosts(net)
            # A warm-up message first: the agents start at different times (as nccl-tests).
            return Agents(net, make_job(ia, ib, 300_000, warmup=1), run_dir, EmulationClock.start(dilation),
                          nic=nic).a_to_b(60 * dilation), since, dilation

    # Its goodput is a rate: measured again, dilated to cover the stalls, if the host
    # stole from an unfaithful run.
    res, _, dilation = again_if_stolen(measure, lambda r: agents_run(r[0], r[1]), dilated=measure)
    assert res["a"]["rows"][0]["wrong"] == 0 and res["b"]["rows"][0]["wrong"] == 0
    rx = flow(res["b"], 1, 0)["rx"]
    assert rx["messages"] == 2 and rx["bad_icrc"] == 0 and rx["out_of_order"] == 0
    assert rx["bytes"] >= 600_000
    # Paced at the 20 Mbit/s line rate (headers included): the sender's goodput is at
    # most that, and not far below (the margin is for a loaded machine).
    assert 12 < res["a"]["rows"][0]["algbw_mbps"] <= 20.0
    # Every data frame's departure was timed, every frame the receiver got was too.
    sent, got = res["a"]["fidelity"], res["b"]["fidelity"]
    assert sent["tx"]["count"] == sent["nics"]["0"]["tx"]["count"] == flow(res["a"], 0, 1)["packets"]
    assert got["rx"]["count"] >= rx["packets"] and got["tx"]["count"] == 0
    assert sent["kernel_drops"] == got["kernel_drops"] == 0 and sent["dilation"] == got["dilation"] == dilation


@pytest.mark.parametrize("nic", NICS)
def test_path_mtu_4096_over_jumbo_veths(tmp_path, nic):
    """RoCE's path MTU 4096 (frames of ~4150 bytes) on 9000-byte-MTU links: every
    frame is read from the NICs' receive rings whole, the message arrives intact."""
    with Netns() as net:
        ia, ib = two_hosts(net, mtu=9000)
        res = Agents(net, make_job(ia, ib, 400_000, mtu=4096), tmp_path, nic=nic).a_to_b(60)
    assert res["b"]["rows"][0]["wrong"] == 0
    rx = flow(res["b"], 1, 0)["rx"]
    assert rx["messages"] == 1 and rx["bad_icrc"] == 0 and rx["out_of_order"] == 0
    assert rx["packets"] == -(-400_000 // 4096)
    assert flow(res["a"], 0, 1)["retransmits"] == 0


def test_dilated_clock_slows_the_wire_not_the_results(tmp_path):
    """With dilation 2 the agents pace at half the line rate in wall time (as read
    from the receiver's kernel timestamps) while their results, in emulated time,
    still show the line rate."""
    size = 300_000
    frames = size // 1024 + 1

    attempts = itertools.count()

    def measure(dilation: float = 2.0) -> tuple[float, list, dict, dict[str, int]]:
        since, run_dir = cpu_ticks(), tmp_path / f"run{next(attempts)}"
        run_dir.mkdir()
        with Netns() as net:
            ia, ib = two_hosts(net)
            agents = Agents(net, make_job(ia, ib, size, warmup=1), run_dir, EmulationClock.start(dilation))
            sniff = net.socket("b", ib)
            try:
                agents.start_ready("b", "b")
                agents.start("a", "a")
                data = receive(sniff, 2 * frames, 30 * dilation, lambda f: (p := roce.parse(f)) is not None
                               and p.opcode != roce.ACKNOWLEDGE and p.dst_ip == socket.inet_aton(IP_B))
                return dilation, data, agents.wait(60 * dilation), since
            finally:
                sniff.close()
                agents.stop()

    # Rates again: measured again, dilated further to cover the stalls, if the host
    # stole from an unfaithful run.
    dilation, data, res, _ = again_if_stolen(measure, lambda r: agents_run(r[2], r[3]),
                                             dilated=lambda d: measure(max(d, 2.0)))
    assert len(data) == 2 * frames
    timed = data[frames:]                        # the timed iteration's message
    wall_mbps = sum(len(f) for _, f in timed[1:]) * 8 / (timed[-1][0] - timed[0][0]) / 1e6
    assert wall_mbps <= 1.05 * 20.0 / dilation
    assert 12 < res["a"]["rows"][0]["algbw_mbps"] <= 20.0


def test_stopped_agents_show_in_their_fidelity(tmp_path):
    """A receiver stopped for 0.3 s handles the frames that waited in its rings 0.3 s
    after they arrived; a sender stopped as long sends its next frame 0.3 s late. Both
    say so in their results."""
    stall = 0.3

    def stop_for(proc: AgentProcess) -> None:
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(stall)                   # the stall itself, not a wait for a condition
        os.kill(proc.pid, signal.SIGCONT)

    def disturb(net: Netns, ia: str, agents: Agents, client: AgentClient) -> None:
        for victim, acked in (("b", 200_000), ("a", 500_000)):
            wait_acked(client, acked)
            stop_for(agents.procs[victim])

    res = ten_messages(tmp_path, disturb)
    assert res["b"]["rows"][0]["wrong"] == 0
    sender, receiver = res["a"]["fidelity"], res["b"]["fidelity"]
    assert receiver["rx"]["max_us"] >= 0.9 * stall * 1e6
    assert sender["tx"]["max_us"] >= 0.9 * stall * 1e6
    # A window of frames waited in the receiver's ring: more than 1 % of what it got.
    assert not receiver["faithful"]


@pytest.mark.parametrize("nic", NICS)
def test_go_back_n_recovers_tail_drops(tmp_path, nic):
    with Netns() as net:
        ia, ib = two_hosts(net)
        # The wire carries 10 Mbit/s with a 10 KB queue; the sender paces at 20.
        net.run("a", "tc", "qdisc", "add", "dev", ia, "root", "tbf", "rate", "10mbit",
                "burst", "5kb", "limit", "10kb")
        res = Agents(net, make_job(ia, ib, 200_000, window=32), tmp_path, nic=nic).a_to_b(90)
    assert res["b"]["rows"][0]["wrong"] == 0
    sender = flow(res["a"], 0, 1)
    assert sender["retransmits"] > 0
    assert flow(res["b"], 1, 0)["rx"]["out_of_order"] > 0


@pytest.mark.parametrize("nic", NICS)
def test_a_timeout_resends_at_once_with_nothing_else_arriving(nic):
    """A one-frame message to a host with no agent: never acknowledged, and nothing else
    reaches the sender. Its retransmissions leave an RTO apart, the first one RTO after
    the frame. The native NIC's thread fired a timeout after its send and slept on: the
    go-back left at the next timeout, two RTOs on (a failure scenario's flow whose frames
    in flight were all lost stalled for the whole 2 s outage); the Python loop's next
    timeline sample covered it."""
    with Netns() as net:
        ia, ib = two_hosts(net)
        job = make_job(ia, ib, 1000)
        rto = job.transport.rto
        engine = Engine(job, "a", nic=nic)
        with net.entered("a"):
            engine.open()
        sniff = net.socket("b", ib)
        try:
            engine.send(0, 1, bytes(500))
            engine.run_until(lambda: False, 2.6 * rto)
            frames = receive(sniff, 3, 2 * rto, lambda f: (p := roce.parse(f)) is not None and p.psn == 0)
        finally:
            engine.close()
            sniff.close()
    times = [t for t, _ in frames]
    assert len(times) == 3, times
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(0.9 * rto <= g <= 1.5 * rto for g in gaps), (gaps, rto)


@pytest.mark.parametrize("nic", NICS)
def test_an_agent_opens_its_nics_at_once_and_a_missing_one_leaves_none_open(nic):
    """Every local rank's two ports (RoCE, MAC control) open together (`tccl.nicports`),
    in rank order; a rank whose interface is missing fails the open, naming it, and no
    packet socket of the others stays open in the server's namespace."""
    def packet_sockets() -> int:
        return len(Path("/proc/thread-self/net/packet").read_text().splitlines()) - 1

    with Netns() as net:
        ia, ib = two_hosts(net)
        job = make_job(ia, ib, 1000)
        second = RankInfo(2, "a", 0, 1, ia, "10.9.1.1", MAC_A, MAC_B)
        engine = Engine(dataclasses.replace(job, ranks=(*job.ranks, second)), "a", nic=nic)
        with net.entered("a"):
            before = packet_sockets()
            engine.open()
            try:
                assert [(rank, n.port.name, n.mac_control.name) for rank, n in engine.nics.items()] == [
                    (r, f"rank {r}", f"rank {r} MAC control") for r in (0, 2)]
                assert packet_sockets() == before + 4
            finally:
                engine.close()
            assert packet_sockets() == before
            missing = dataclasses.replace(second, iface="nosuch0")
            engine = Engine(dataclasses.replace(job, ranks=(*job.ranks, missing)), "a", nic=nic)
            with pytest.raises(PortError, match="rank 2: cannot open interface 'nosuch0'"):
                engine.open()
            assert packet_sockets() == before


@pytest.mark.parametrize("nic", NICS)
def test_frames_are_handled_at_their_arrival_time(nic):
    """Two CE-marked packets arrive three CNP intervals apart and the agent reads
    them in one batch, later: it answers both with a CNP, because by their arrival
    times they were that far apart (by the time it got to them, they were not). The
    native NIC reads them on its own thread, so the stats are waited for, not read once."""
    with Netns() as net:
        ia, ib = two_hosts(net)
        job = make_job(ia, ib, 1000)
        engine = Engine(job, "b", nic=nic)
        with net.entered("b"):
            engine.open()
        tx, sniff = net.socket("a", ia), net.socket("b", ib)
        try:
            interval = job.transport.dcqcn().cnp_interval
            marked = roce.FrameTemplate(roce.Endpoint(MAC_A, IP_A), roce.Endpoint(MAC_B, IP_B), 50000,
                                        qpn(1, 0), ecn=roce.ECN_CE)
            tx.send(marked.frame(roce.SEND_FIRST, 0, bytes(100)))
            time.sleep(3 * interval)        # the gap between the arrivals
            tx.send(marked.frame(roce.SEND_LAST, 1, bytes(100)))
            assert len(receive(sniff, 2, 5, lambda f: roce.parse(f) is not None)) == 2
            def both_handled():
                engine.turn(until=engine.clock())
                snapshot = engine.qps[qpn(1, 0)].responder.stats
                return snapshot if snapshot.ce_marked == 2 else None
            stats = wait_for("both CE-marked frames handled", both_handled, 5)
        finally:
            engine.close()
            tx.close()
            sniff.close()
    assert stats.ce_marked == 2 and stats.cnps_sent == 2
    assert 2.5 * interval <= stats.min_cnp_gap


class Marker:
    """Forward frames between two interfaces of a middle namespace, setting CE on the
    first ``count`` ECT data frames (what a switch does when its queue builds up)."""

    def __init__(self, net: Netns, ns: str, left: str, right: str, count: int) -> None:
        self.socks = (net.socket(ns, left), net.socket(ns, right))
        self.count = count
        self.marked = 0
        self.cnps = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        left, right = self.socks
        while not self.stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for sock in ready:
                frame = bytearray(sock.recv(65535))
                pkt = roce.parse(bytes(frame))
                if pkt is not None and pkt.opcode == roce.CNP:
                    self.cnps += 1
                if pkt is not None and pkt.ecn == roce.ECN_ECT0 and self.marked < self.count:
                    frame[roce.IP_OFF + 1] |= roce.ECN_CE   # IP checksum: ICRC masks TOS, but
                    _fix_ip_checksum(frame)                 # the IPv4 checksum must follow
                    self.marked += 1
                (right if sock is left else left).send(bytes(frame))

    def __enter__(self) -> "Marker":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        for s in self.socks:
            s.close()


def _fix_ip_checksum(frame: bytearray) -> None:
    frame[roce.IP_OFF + 10:roce.IP_OFF + 12] = b"\0\0"
    words = [int.from_bytes(frame[roce.IP_OFF + i:roce.IP_OFF + i + 2], "big") for i in range(0, 20, 2)]
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    frame[roce.IP_OFF + 10:roce.IP_OFF + 12] = (~total & 0xFFFF).to_bytes(2, "big")


@pytest.mark.parametrize("nic", NICS)
def test_ce_marks_produce_cnps_and_rate_cut(tmp_path, nic):
    marked = 60
    with Netns() as net:
        for ns in ("a", "m", "b"):
            net.add_ns(ns)
        ia, ml = net.add_link("a", "m")
        mr, ib = net.add_link("m", "b")
        configure(net, "a", ia, MAC_A, IP_A)
        configure(net, "b", ib, MAC_B, IP_B)
        job = make_job(ia, ib, 400_000)
        agents = Agents(net, job, tmp_path, nic=nic)
        try:
            with Marker(net, "m", ml, mr, marked) as marker:
                agents.start_ready("b", "b")
                agents.start("a", "a")
                res = agents.wait(90)
        finally:
            agents.stop()
    assert marker.marked == marked
    assert res["b"]["rows"][0]["wrong"] == 0
    rx = flow(res["b"], 1, 0)["rx"]
    sender = flow(res["a"], 0, 1)
    assert rx["ce_marked"] == marked
    # CNPs on the wire: several, never two within one CNP interval by the receiver's
    # clock (marked packets come every 0.45 ms at line rate).
    assert marker.cnps == rx["cnps_sent"] >= 2
    assert rx["min_cnp_gap"] >= job.transport.dcqcn().cnp_interval
    assert sender["cnps"] == rx["cnps_sent"]
    # The cut rate slowed the transfer below line rate.
    assert res["b"]["rows"][0]["algbw_mbps"] < 0.9 * job.transport.line_mbps


@pytest.mark.parametrize("nic", NICS)
def test_control_channel_lists_flows_and_moves_a_flow(tmp_path, nic):
    with Netns() as net:
        ia, ib = two_hosts(net)
        # 12 messages of 150 KB (~60 ms each at 20 Mbit/s): boundaries to move at.
        agents = Agents(net, make_job(ia, ib, 150_000, iters=12), tmp_path, nic=nic)
        sniff = net.socket("b", ib)
        try:
            agents.start_ready("b", "b")
            agents.start("a", "a")
            path = socket_path(tmp_path, "a")
            with AgentClient(path) as client:
                deadline = time.monotonic() + 20
                flows = []
                while time.monotonic() < deadline and not any(
                        f.qpn == qpn(0, 1) and f.bytes > 200_000 for f in flows):
                    if path.exists():
                        try:
                            flows = client.list_flows()
                        except grpc.RpcError:
                            pass
                    time.sleep(0.02)
                f = next(f for f in flows if f.qpn == qpn(0, 1))
                assert (f.src_ip, f.dst_ip, f.dport, f.state) == (IP_A, IP_B, 4791, "active")
                with pytest.raises(grpc.RpcError) as bad:
                    client.set_source_port(80, qpn=f.qpn)
                assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "invalid source port 80" in bad.value.details()
                with pytest.raises(grpc.RpcError) as unknown:
                    client.set_source_port(50000, qpn=0x123)
                assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
                assert "0x123" in unknown.value.details()
                new = 40000 if f.sport != 40000 else 40001
                reply = client.set_source_port(new, src_ip=IP_A, dst_ip=IP_B, current_sport=f.sport)
                assert reply.old_sport == f.sport and reply.flow.sport == new
            # The wire shows the new port from some packet on, and never the old one after.
            ports = []
            end = time.monotonic() + 30
            while time.monotonic() < end and agents.procs["a"].poll() is None:
                ready, _, _ = select.select([sniff], [], [], 0.1)
                if ready:
                    p = roce.parse(sniff.recv(65535))
                    if p is not None and p.opcode != roce.ACKNOWLEDGE:
                        ports.append(p.sport)
            res = agents.wait(60)
        finally:
            sniff.close()
            agents.stop()
    assert new in ports
    assert f.sport not in ports[ports.index(new):]
    assert res["b"]["rows"][0]["wrong"] == 0
    assert flow(res["b"], 1, 0)["rx_last_sport"] == new


def test_tp_allreduce_split_over_nvlink_and_nics(tmp_path):
    """One server, two NICs joined by a veth pair (its "fabric"): a trace's tp AllReduce
    runs over NVLink and the NICs at once, right results, share set by measurement."""
    trace = tmp_path / "tp.yaml"
    trace.write_text("iterations: 3\nsteps:\n  - {op: allreduce, group: tp, size: 200000}\n")
    with Netns() as net:
        net.add_ns("s")
        i0, i1 = net.add_link("s", "s")
        configure(net, "s", i0, MAC_A, IP_A)
        configure(net, "s", i1, MAC_B, IP_B)
        ranks = (RankInfo(0, "s", 0, 0, i0, IP_A, MAC_A, MAC_B),
                 RankInfo(1, "s", 0, 1, i1, IP_B, MAC_B, MAC_A))
        # NVLink only 2x the NICs: the NICs carry a visible third of the data.
        job = Job(ranks=ranks, transport=Transport(line_mbps=20.0, mtu=1024, nvlink_gbps=0.04, tp_split=True),
                  workload=Workload(trace=str(trace)), name="split")
        agents = Agents(net, job, tmp_path)
        try:
            agents.start("s", "s")
            res = agents.wait(90)["s"]
        finally:
            agents.stop()
    assert res["tp_split_wrong"] == 0
    shares = res["tp_nvlink_share"]
    assert len(shares) == 3 and all(0.3 < s < 0.95 for s in shares)
    nic = flow(res, 0, 1)
    assert nic["acked_bytes"] > 0.05 * 200_000 * 3


@pytest.mark.parametrize("nic", NICS)
def test_link_down_and_up_loses_nothing(tmp_path, nic):
    """A link failure mid-transfer (the sender's NIC down for 0.5 s) only delays it."""
    def disturb(net: Netns, ia: str, agents: Agents, client: AgentClient) -> None:
        wait_acked(client, 200_000)                     # 2 of 10 messages are through
        net.run("a", "ip", "link", "set", ia, "down")
        time.sleep(0.5)                                 # the outage
        net.run("a", "ip", "link", "set", ia, "up")

    res = ten_messages(tmp_path, disturb, nic)
    assert res["b"]["rows"][0]["wrong"] == 0
    assert flow(res["b"], 1, 0)["rx"]["messages"] == 10
    assert flow(res["a"], 0, 1)["timeouts"] + flow(res["a"], 0, 1)["naks"] > 0


@pytest.mark.parametrize("nic", NICS)
def test_tree_allreduce_over_two_servers(tmp_path, nic):
    """Two servers of two rails each, one veth pair per rail (each rail its own
    "leaf"): the rail-aware tree AllReduce gives every rank the XOR of all inputs, its
    one edge between the servers stays on a rail, and the rest rides NVLink."""
    with Netns() as net:
        net.add_ns("a")
        net.add_ns("b")
        ranks = []
        for rail in range(2):
            ia, ib = net.add_link("a", "b")
            mac_a, mac_b = f"02:00:0a:0{rail}:00:01", f"02:00:0a:0{rail}:00:02"
            ip_a, ip_b = f"10.9.{rail}.1", f"10.9.{rail}.2"
            configure(net, "a", ia, mac_a, ip_a)
            configure(net, "b", ib, mac_b, ip_b)
            ranks += [RankInfo(0, "a", 0, rail, ia, ip_a, mac_a, mac_b),
                      RankInfo(0, "b", 0, rail, ib, ip_b, mac_b, mac_a)]
        ranks.sort(key=lambda r: (r.server, r.rail))
        ranks = [dataclasses.replace(r, rank=k) for k, r in enumerate(ranks)]
        job = Job(ranks=tuple(ranks), transport=Transport(line_mbps=20.0, mtu=1024, nvlink_gbps=1.0),
                  workload=Workload(op="allreduce", sizes=(50_000,), iters=1, warmup=0, algo="tree"),
                  name="tree")
        agents = Agents(net, job, tmp_path, nic=nic)
        try:
            agents.start("a", "a")
            agents.start("b", "b")
            res = agents.wait(60)
        finally:
            agents.stop()
    for r in res.values():
        assert r["algo"] == "tree" and r["rows"][0]["wrong"] == 0
        assert r["tree_hops"] == {"intra_server": 2, "same_leaf": 1, "spine": 0, "cross_block": 0}
    crossing = [(int(c), p) for c, p in res["a"]["tree"].items()
                if p is not None and ranks[int(c)].server != ranks[p].server]
    assert len(crossing) == 1 and ranks[crossing[0][0]].rail == ranks[crossing[0][1]].rail
