"""``p4sim switch`` as a process between two network namespaces, with a real pipeline.

The pipeline is tests/device_fixtures/two_port_qdepth.json, a hand-written BMv2 JSON
of this v1model program:

    parser: ethernet, then ipv4 if etherType == 0x0800
    ingress: egress_spec = (ingress_port == 1) ? 2 : 1;
             if (ipv4.isValid()) priority = ipv4.dscp & 7;
    egress:  if (ipv4.isValid()) {
                 ipv4.identification = (bit<16>) enq_qdepth;
                 if (enq_qdepth >= 10) ipv4.ecn = 3;      // ECN marking at a threshold
             }
    deparser: ethernet, ipv4

Packets are built with Scapy and sent on sockets opened inside the host namespaces;
the switch runs in its own namespace and is always terminated by PID.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import rdpcap

from netns import receive
from switchproc import SwitchProcess
from testkit import IDLE_WAKEUPS, context_switches, settled, wait_for
from topo.namespaces import Netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

FIXTURE = Path(__file__).parent / "device_fixtures" / "two_port_qdepth.json"
ECN_THRESHOLD = 10  # the fixture's marking threshold (packets)
DPORT = 4791


def udp(seq: int, size: int = 200, src: str = "10.0.1.1", dst: str = "10.0.2.2",
        tos: int = 1) -> Ether:
    pkt = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:02:02") / IP(src=src, dst=dst, tos=tos) \
        / UDP(sport=10000 + seq, dport=DPORT)
    return pkt / Raw(bytes(max(0, size - len(pkt))))


def ours(frame: bytes) -> bool:
    pkt = Ether(frame)
    return UDP in pkt and pkt[UDP].dport == DPORT


def recv_until(sock, count: int, timeout: float, keep=ours) -> list[tuple[float, bytes]]:
    """Our frames with their kernel arrival times, until ``count`` or ``timeout``."""
    return receive(sock, count, timeout, keep)


def start_switch(net: Netns, workdir: Path, *args: str) -> SwitchProcess:
    """``p4sim switch`` in namespace sw with port 1 towards h1 and port 2 towards h2."""
    return SwitchProcess(workdir, "-i", f"1@{net.ifaces['s1']}", "-i", f"2@{net.ifaces['s2']}",
                         "--log-level", "info", *args, prefix=net.exec_prefix("sw"))


@pytest.fixture
def net():
    with Netns() as n:
        n.add_switch_and_hosts()
        yield n


@pytest.fixture
def switch(net, tmp_path):
    """Factory: start a switch with extra flags; every switch started is stopped."""
    started: list[SwitchProcess] = []

    def start(*args: str) -> SwitchProcess:
        started.append(start_switch(net, tmp_path, *args))
        return started[-1]

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def l2(net):
    """Scapy L2 sockets opened inside h1 and h2 (reused for every packet)."""
    from scapy.config import conf

    socks = {}
    for host in ("h1", "h2"):
        with net.entered(host):
            socks[host] = conf.L2socket(iface=net.ifaces[host])
    yield socks
    for s in socks.values():
        s.close()


def test_forwards_between_namespaces_in_both_directions(net, switch, l2):
    sw = switch(str(FIXTURE))
    rx2, rx1 = net.socket("h2", net.ifaces["h2"]), net.socket("h1", net.ifaces["h1"])
    sent = [udp(i) for i in range(10)]
    for pkt in sent:
        l2["h1"].send(pkt)
    got = recv_until(rx2, 10, timeout=10)
    assert len(got) == 10
    for pkt, (_, frame) in zip(sent, got):
        out = Ether(frame)
        # Payloads compared as bytes: once scapy's RoCE layer is imported anywhere in the
        # session, it decodes UDP port 4791 as BTH and Raw would be shorter.
        assert out[UDP].sport == pkt[UDP].sport and bytes(out[UDP].payload) == bytes(pkt[UDP].payload)
        assert out[IP].tos == 1  # below the ECN threshold: not marked
    l2["h2"].send(udp(99, src="10.0.2.2", dst="10.0.1.1"))
    back = recv_until(rx1, 1, timeout=10)
    assert len(back) == 1 and Ether(back[0][1])[IP].dst == "10.0.1.1"
    assert sw.stop() == 0
    # The switch saw 11 frames: its own 11 transmissions were not read back as input.
    assert "rx=11," in sw.log_text() and "tx=11," in sw.log_text()


def test_rate_limited_port_drains_at_configured_rate_and_marks_ecn(net, switch, l2):
    mbps, size = 8.0, 1000
    rate = mbps * 1e6 / 8  # bytes/s
    # A deep queue rides out the sender (this test) being descheduled on a busy
    # machine, so the port stays backlogged and its drain rate is what is measured.
    sw = switch(str(FIXTURE), "--port-rate", f"2={mbps:g}", "--queue-depth", "200")
    rx = net.socket("h2", net.ifaces["h2"])
    arrivals: list[tuple[float, bytes]] = []
    receiver = threading.Thread(target=lambda: arrivals.extend(recv_until(rx, 10**6, 4.5)))
    receiver.start()
    template = bytes(udp(0, size))
    start, sent = time.monotonic(), 0
    while time.monotonic() - start < 3.0:  # offer 1.5x the port rate
        due = int((time.monotonic() - start) * 1.5 * rate / size)
        while sent < due:
            l2["h1"].send(template)
            sent += 1
        time.sleep(0.001)
    receiver.join()
    window = [t for t, _ in arrivals if t - arrivals[0][0] > 0.5]
    measured = (len(window) - 1) * size / (window[-1] - window[0])
    assert measured == pytest.approx(rate, rel=0.05)
    depths = [Ether(f)[IP].id for _, f in arrivals]
    assert max(depths) == 199  # a packet finds at most depth - 1 ahead of it
    assert all((Ether(f)[IP].tos & 3 == 3) == (d >= ECN_THRESHOLD) for (_, f), d in zip(arrivals, depths))
    assert sw.stop() == 0
    assert "queue_drops={2:" in sw.log_text()


def test_ecn_marks_exactly_when_queue_exceeds_threshold(net, switch, l2):
    switch(str(FIXTURE), "--port-rate", "2=0.8")  # 100 kB/s: 10 ms per 1000-byte packet
    rx = net.socket("h2", net.ifaces["h2"])
    burst = [bytes(udp(i, 1000)) for i in range(25)]  # built first: sent within a few ms
    for frame in burst:
        l2["h1"].send(frame)
    got = [Ether(f) for _, f in recv_until(rx, 25, timeout=10)]
    assert [p[UDP].sport - 10000 for p in got] == list(range(25))
    depths = [p[IP].id for p in got]
    # One packet arrives at a time, so the queue grows by at most one between
    # consecutive packets (it shrinks if the sender falls behind the 10 ms drain).
    assert depths[0] == 0 and max(depths) >= ECN_THRESHOLD
    assert all(b - a <= 1 for a, b in zip(depths, depths[1:]))
    marked = [p[IP].tos & 3 == 3 for p in got]
    assert marked == [d >= ECN_THRESHOLD for d in depths]
    assert any(marked) and not all(marked)


def test_priority_queues_serve_higher_priority_first(net, switch, l2):
    sw = switch(str(FIXTURE), "--priority-queues", "2", "--port-rate", "2=0.8")
    rx = net.socket("h2", net.ifaces["h2"])
    low = [bytes(udp(i, 1000)) for i in range(8)]
    high = [bytes(udp(100 + i, 1000, tos=1 << 2)) for i in range(3)]  # dscp 1: priority 1
    burst = low + high + [bytes(udp(200, 1000, tos=2 << 2))]  # priority 2: no such queue
    for frame in burst:
        l2["h1"].send(frame)
    got = [Ether(f) for _, f in recv_until(rx, 11, timeout=10)]
    order = [p[UDP].sport - 10000 for p in got]
    # The first low-priority packet may leave at once, before the rest of the burst is
    # in; the high-priority ones overtake every low one still queued.
    first_high = order.index(100)
    assert first_high <= 1 and order[first_high:first_high + 3] == [100, 101, 102]
    assert [o for o in order if o < 100] == list(range(8))
    assert [p[IP].id for p in got[first_high:first_high + 3]] == [0, 1, 2]  # own queue's depth
    assert sw.stop() == 0
    assert "priority 2 out of range" in sw.log_text() and "queue_drops={2: 1}" in sw.log_text()


def test_pcap_files_hold_the_packets_while_running(net, switch, l2, tmp_path):
    pcaps = tmp_path / "pcaps"
    switch(str(FIXTURE), "--pcap", str(pcaps))
    rx = net.socket("h2", net.ifaces["h2"])
    sent = [udp(i, 300) for i in range(5)]
    for pkt in sent:
        l2["h1"].send(pkt)
    assert len(recv_until(rx, 5, timeout=10)) == 5
    s1, s2 = net.ifaces["s1"], net.ifaces["s2"]

    def captured(name: str) -> list[Ether]:
        return [p for p in rdpcap(str(pcaps / name)) if UDP in p and p[UDP].dport == DPORT]

    # The switch is still running: captures must already be readable.
    wait_for("the egress capture", lambda: len(captured(f"{s2}_out.pcap")) == 5, 10)
    ins, outs = captured(f"{s1}_in.pcap"), captured(f"{s2}_out.pcap")
    assert [bytes(p) for p in ins] == [bytes(p) for p in sent]
    assert [bytes(p[UDP].payload) for p in outs] == [bytes(p[UDP].payload) for p in sent]
    assert captured(f"{s2}_in.pcap") == [] and captured(f"{s1}_out.pcap") == []


def test_vlan_tags_reach_the_pipeline(net, switch, l2, tmp_path):
    # The kernel moves 802.1Q tags out of received frames into metadata; the port must
    # put them back, or the P4 parser would see a different packet than was sent.
    pcaps = tmp_path / "pcaps"
    switch(str(FIXTURE), "--pcap", str(pcaps))
    tagged = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:02:02") / Dot1Q(vlan=42, prio=3) \
        / IP(src="10.0.1.1", dst="10.0.2.2") / UDP(sport=1, dport=DPORT) / Raw(b"v" * 40)
    l2["h1"].send(tagged)
    out_file = pcaps / f"{net.ifaces['s2']}_out.pcap"
    wait_for("the tagged frame to be forwarded", lambda: len(rdpcap(str(out_file))) == 1, 10)
    for name in (f"{net.ifaces['s1']}_in.pcap", out_file.name):
        (pkt,) = rdpcap(str(pcaps / name))
        assert bytes(pkt) == bytes(tagged), name


def test_malformed_and_truncated_frames_do_not_stop_the_switch(net, switch, l2):
    sw = switch(str(FIXTURE))
    tx = net.socket("h1", net.ifaces["h1"])
    rx = net.socket("h2", net.ifaces["h2"])
    valid = bytes(udp(7, 100))
    bad = [valid[:14],                   # Ethernet says IPv4, nothing follows
           valid[:30],                   # IPv4 header cut short
           b"\x02" * 6 + b"\x02\x00\x00\x00\x00\x09" + b"\x08\x00" + b"\x45",  # 1 byte of IPv4
           bytes(range(256)) * 5,        # garbage
           valid[:14] + b"\xff" * 1486]  # IPv4 with an absurd header
    for frame in bad:
        tx.send(frame)
    l2["h1"].send(udp(1, 100))
    got = recv_until(rx, 1, timeout=10)
    assert len(got) == 1 and sw.proc.poll() is None
    assert sw.stop() == 0
    assert "pipeline_errors=0" in sw.log_text()


def test_no_p4_switch_drops_until_a_pipeline_is_loaded(net, switch, l2):
    sw = switch("--no-p4")
    rx = net.socket("h2", net.ifaces["h2"])
    l2["h1"].send(udp(1))
    assert recv_until(rx, 1, timeout=1.0) == []
    assert sw.stop() == 0
    assert "no_pipeline=1" in sw.log_text()


def loop_thread(pid: int) -> int | None:
    """The thread of process ``pid`` that forwards packets: the native loop's (loop.c
    names it ``p4n-loop``), else None."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == "p4n-loop":
            return int(task.name)
    return None


def test_idle_switch_process_does_not_wake_up(net, switch):
    """The process's packet loop sleeps with nothing to forward: it does not run for a
    second (`make bench`: switch_idle_cpu_frac, the whole process's CPU with its
    P4Runtime server). The loop is the native loop's thread when the switch runs it
    (the main thread only waits for it then: watching the main thread instead caught it
    blocked for a moment while it was still starting the loop's threads, a few context
    switches before it settled in its wait), else the main thread. Measured once the
    loop has settled: a fresh-clone CI run saw one wake-up in the second after it was
    first seen asleep -- the native loop sleeps out a quantum after each wake-up, in
    state S too. At most `testkit.IDLE_WAKEUPS`, for a stray frame."""
    sw = switch(str(FIXTURE), "--port-rate", "2=10")
    pid = sw.proc.pid
    if "native loop" in sw.log_text():
        wait_for("the native loop's thread", lambda: loop_thread(pid) is not None, 5)
        loop = loop_thread(pid)
    else:
        loop = pid
    wait_for("the loop to settle in its wait", lambda: settled(loop, pid), 5)
    before = context_switches(loop, pid)
    time.sleep(1.0)  # idleness is what is measured: there is nothing to wait for
    assert context_switches(loop, pid) - before <= IDLE_WAKEUPS


def test_bad_flags_are_reported_before_anything_starts(tmp_path, capsys):
    from p4sim.switch.command import main

    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"header_types": [\n')
    cases = [
        (["-i", "eth0", "--no-p4"], "expected PORT@IFACE"),
        (["-i", "1@lo", "-i", "1@lo", "--no-p4"], "same port number"),
        (["-i", "1@lo"], "give a BMv2 JSON file or --no-p4"),
        (["--no-p4", str(FIXTURE)], "exclude each other"),
        ([str(tmp_path / "missing.json")], "cannot read pipeline"),
        ([str(bad_json)], "bad.json:2:1: not valid JSON"),
        (["--port-rate", "2=fast", "--no-p4"], "--port-rate '2=fast'"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        assert message in capsys.readouterr().err, args


def test_startup_failures_exit_with_an_error(tmp_path):
    bad_program = tmp_path / "bad_program.json"
    bad_program.write_text('{"header_types": 5}')
    cases = [
        (["-i", "1@p4sim-no-such-if", "--no-p4"], "cannot open interface 'p4sim-no-such-if'"),
        ([str(bad_program), "--grpc-server-addr", f"unix:{tmp_path}/s.sock"],
         f"cannot load pipeline {bad_program}: malformed BMv2 JSON"),
    ]
    for args, message in cases:
        result = subprocess.run([sys.executable, "-m", "p4sim.cli", "switch", *args],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, args
        assert message in result.stderr, (args, result.stderr)
