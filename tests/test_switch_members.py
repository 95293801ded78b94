"""``p4sim switches --members`` with ``p4sim switch-member`` processes (p4sim/switch/member.py):
two switches in one process on one packet loop, each alive exactly as long as its
member process. Killing one member (SIGKILL) stops that switch alone -- its P4Runtime
server gone, its ports silent -- while the other forwards on; a new member brings it
back; SIGTERM stops a member only once its switch has stopped; the shared process's end
ends its members. The processes run in a namespace of their own, on veths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from emulation.clock import EmulationClock
from netns import receive
from p4sim.switch.member import READY
from testkit import wait_for
from topo.namespaces import Netns
from topo.processes import stop_process

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

FIXTURE = Path(__file__).parent / "device_fixtures" / "two_port_qdepth.json"   # forwards 1 <-> 2
DPORT = 4791
START_TIMEOUT_S = 30.0
TCP_LISTEN = "0A"


def udp(seq: int) -> bytes:
    pkt = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:02:02") / \
        IP(src="10.0.1.1", dst="10.0.2.2") / UDP(sport=10000 + seq, dport=DPORT)
    return bytes(pkt / Raw(bytes(100)))


def ours(frame: bytes) -> bool:
    return len(frame) > 37 and frame[12:14] == b"\x08\x00" and frame[36:38] == DPORT.to_bytes(2, "big")


def listening_ports(pid: int) -> set[int]:
    """TCP ports listening in ``pid``'s network namespace (here: the shared process's own)."""
    ports = set()
    for proto in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == TCP_LISTEN:
                ports.add(int(fields[1].split(":")[1], 16))
    return ports


class Member:
    """A ``p4sim switch-member`` process for switch ``device_id`` on two of the net's veths."""

    def __init__(self, sock: Path, log: Path, net: Netns, device_id: int, ports: tuple[str, str],
                 clock: EmulationClock) -> None:
        self.port = 50050 + device_id
        self.log = log
        cmd = [sys.executable, "-m", "p4sim.cli", "switch-member", "--shared", str(sock), "--",
               str(FIXTURE), "-i", f"1@{net.ifaces[ports[0]]}", "-i", f"2@{net.ifaces[ports[1]]}",
               "--device-id", str(device_id), "--grpc-server-addr", f"127.0.0.1:{self.port}", "--clock", clock.encode()]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        wait_for(f"member {device_id} running", lambda: READY in log.read_text() or self.proc.poll() is not None,
                 START_TIMEOUT_S)
        assert READY in log.read_text(), log.read_text()


@pytest.fixture
def net():
    """sw with two switches' veths: s1, s2 towards h1, h2 (switch 1); s3, s4 towards h3, h4 (switch 2)."""
    with Netns() as n:
        for ns in ("sw", "h1", "h2", "h3", "h4"):
            n.add_ns(ns)
        for k in range(1, 5):
            n.ifaces[f"s{k}"], n.ifaces[f"h{k}"] = n.add_link("sw", f"h{k}")
        yield n


def test_a_killed_member_stops_its_switch_alone_and_a_new_one_brings_it_back(net: Netns, tmp_path: Path) -> None:
    sock, log = tmp_path / "switches.sock", tmp_path / "switches.log"
    shared = subprocess.Popen([*net.exec_prefix("sw"), sys.executable, "-m", "p4sim.cli", "switches",
                               "--members", str(sock), "--log-file", str(log)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    members: list[Member] = []
    clock = EmulationClock.start()   # one loop runs the switches of one clock
    try:
        members += [Member(sock, tmp_path / "m1.log", net, 1, ("s1", "s2"), clock),
                    Member(sock, tmp_path / "m2.log", net, 2, ("s3", "s4"), clock)]
        h = {k: net.socket(f"h{k}", net.ifaces[f"h{k}"]) for k in range(1, 5)}

        def through(a: int, b: int, seq: int) -> list:
            h[a].send(udp(seq))
            return receive(h[b], 1, 5.0 if seq > 0 else 0.3, ours)

        assert len(through(1, 2, 1)) == 1 and len(through(3, 4, 2)) == 1
        assert {50051, 50052} <= listening_ports(shared.pid)

        os.kill(members[0].proc.pid, signal.SIGKILL)
        wait_for("switch 1's server gone", lambda: 50051 not in listening_ports(shared.pid), 10)
        assert through(1, 2, -1) == []                 # its ports silent
        assert len(through(3, 4, 3)) == 1              # the other forwards on
        assert 50052 in listening_ports(shared.pid) and shared.poll() is None

        members[0] = Member(sock, tmp_path / "m1b.log", net, 1, ("s1", "s2"), clock)
        assert 50051 in listening_ports(shared.pid)
        assert len(through(1, 2, 4)) == 1 and len(through(3, 4, 5)) == 1

        # SIGTERM, twice as Mininet's stop sends it: the member exits (0) once its switch
        # has stopped, the second signal notwithstanding -- even when it lands as the
        # member exits (the switch's stop takes a few ms). (A gap between them: two at
        # once reach the handler as one.)
        members[1].proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
        members[1].proc.send_signal(signal.SIGTERM)
        assert members[1].proc.wait(10) == 0
        assert "stopped (pid" in members[1].log.read_text()
        assert 50052 not in listening_ports(shared.pid)
        assert through(3, 4, -2) == []
        assert len(through(1, 2, 6)) == 1

        # The shared process ended: its members end with it.
        assert stop_process(shared, 10) == 0
        assert members[0].proc.wait(10) == 1
        assert "the switch is gone" in members[0].log.read_text()
    finally:
        for m in members:
            stop_process(m.proc, 10)
        stop_process(shared, 10)
        if log.exists():
            print(log.read_text())
