"""The device loop on real veths, with a stand-in pipeline (no P4 engine needed).

The stand-in forwards port 1 <-> port 2 and writes the queueing metadata it is given
into the frame, so these tests see exactly what the device hands to the egress
pipeline: rates, queue depths, PacketIn/PacketOut, loop-back filtering, idle CPU.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from scapy.contrib.mac_control import MACControl, MACControlClassBasedFlowControl
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from netns import receive
from standin import Job
from testkit import IDLE_WAKEUPS, DeviceLoop, context_switches, settled, wait_for
from p4sim.switch.device import Device
from p4sim.switch.pause import MAX_QUANTA, pfc_frame
from p4sim.switch.pfc import PfcConfig
from p4sim.switch.ports import InterfacePort, PortError, close_ports, open_ports
from topo.namespaces import Netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

META = struct.Struct("!IIII")  # enq_qdepth, deq_qdepth, enq_timestamp, deq_timedelta
META_AT = 32  # where the stand-in egress writes META into a frame
ETHERTYPE = b"\x88\xb5"  # IEEE local experimental: nothing else on the veths uses it


class WireEngine:
    """Port 1 <-> port 2; frames from the CPU port go out of the port named in byte 14."""

    def __init__(self, cpu_port: int | None = None) -> None:
        self.cpu_port = cpu_port

    def run_ingress(self, port: int, data: bytes) -> list[Job]:
        if port == self.cpu_port:
            return [Job(data[14], 0, data)]
        if data[12:14] != ETHERTYPE:
            return []
        if data[14:15] == b"C":
            return [Job(self.cpu_port, 0, data)]
        return [Job(2 if port == 1 else 1, 0, data)]

    def run_egress(self, job: Job, enq_qdepth: int, deq_qdepth: int, enq_timestamp: int,
                   deq_timedelta: int) -> tuple[list[tuple[int, bytes]], list[Job]]:
        meta = META.pack(enq_qdepth, deq_qdepth, enq_timestamp, deq_timedelta)
        return [(job.port, job.data[:META_AT] + meta + job.data[META_AT + META.size:])], []


def frame(tag: bytes, size: int = 100) -> bytes:
    head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + ETHERTYPE + tag
    return head + bytes(size - len(head))


def recv_until(sock, count: int, timeout: float) -> list[tuple[float, bytes]]:
    """Frames of our ethertype with kernel arrival times, until ``count`` or ``timeout``."""
    return receive(sock, count, timeout, lambda data: data[12:14] == ETHERTYPE)


@pytest.fixture
def net():
    with Netns() as n:
        n.add_switch_and_hosts()
        yield n


class Running(DeviceLoop):
    """A Device built inside the switch namespace, its loop in a thread; always stopped."""

    def __init__(self, net: Netns, engine, **kwargs) -> None:
        with net.entered("sw"):
            device = Device({1: net.ifaces["s1"], 2: net.ifaces["s2"]}, **kwargs)
        device.install(engine)
        super().__init__(device)


def test_forwarding_both_ways_and_own_transmissions_not_read_back(net):
    tx1, tx2 = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    with Running(net, WireEngine()) as dev:
        for i in range(20):
            tx1.send(frame(b"A" + bytes([i])))
        got = recv_until(tx2, 20, timeout=5)
        assert len(got) == 20
        tx2.send(frame(b"B"))
        assert len(recv_until(tx1, 1, timeout=5)) == 1
    assert dev.counters["rx"] == 21 and dev.counters["tx"] == 21


def test_port_rate_is_met_under_overload(net):
    rate = 1_000_000.0  # bytes/s = 8 Mbit/s
    size = 1000
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    arrivals: list[tuple[float, bytes]] = []
    # A deep queue rides out the sender (this process) being descheduled on a busy
    # machine, so the port stays backlogged and its drain rate is what is measured.
    with Running(net, WireEngine(), port_rates={2: rate}, queue_depth=500) as dev:
        receiver = threading.Thread(target=lambda: arrivals.extend(recv_until(rx, 10**6, 4.0)))
        receiver.start()
        start, sent = time.monotonic(), 0
        while time.monotonic() - start < 3.0:  # offer 1.5x the port rate
            due = int((time.monotonic() - start) * 1.5 * rate / size)
            while sent < due:
                tx.send(frame(b"R", size))
                sent += 1
            time.sleep(0.001)
        receiver.join()
        drops = dev.queue_stats()[2]["drops"]
    metas = [META.unpack_from(d, META_AT) for _, d in arrivals]
    # Never faster than the rate, however late the loop woke: the k-th frame out left
    # (switch clock, us) no earlier than k serialisation times after the first one came
    # in. How close to the rate the port gets is machine speed: `make bench`'s
    # switch_port_rate_frac.
    first_in, serialisation_us = metas[0][2], size / rate * 1e6
    early = [k for k, (_, _, enq, delta) in enumerate(metas) if enq + delta < first_in + k * serialisation_us]
    assert early == [], early[:5]
    assert drops > 0.2 * sent
    assert max(m[0] for m in metas) == 499


def test_queue_metadata_follow_the_queue(net):
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    with Running(net, WireEngine(), port_rates={2: 25_000.0}):  # 1000 B per 40 ms
        for i in range(20):
            tx.send(frame(b"Q" + bytes([i]), 1000))
        got = recv_until(rx, 20, timeout=10)
    assert [d[15] for _, d in got] == list(range(20))  # FIFO order
    metas = [META.unpack_from(d, META_AT) for _, d in got]
    enq = [m[0] for m in metas]
    # The burst (well under a millisecond) arrives much faster than it drains (40 ms a
    # packet, the first leaving at once): each packet finds the earlier ones still
    # queued, except those already gone, and when it leaves all later ones are queued
    # behind it.
    assert enq[0] == 0 and enq[-1] >= 17
    assert all(b - a <= 1 for a, b in zip(enq, enq[1:]))
    assert [m[1] for m in metas[1:]] == [19 - k for k in range(1, 20)]
    deltas = [m[3] for m in metas]
    assert deltas[-1] > 500_000 and deltas == sorted(deltas)


def test_packet_out_and_packet_in(net):
    rx1 = net.socket("h1", net.ifaces["h1"])
    packet_ins: list[bytes] = []
    got_in = threading.Event()

    def on_packet_in(data: bytes) -> None:
        packet_ins.append(data)
        got_in.set()

    with Running(net, WireEngine(cpu_port=255), cpu_port=255) as dev:
        dev.packet_in_handler = on_packet_in
        out = frame(b"\x01")  # byte 14 = egress port 1
        dev.inject(out)
        got = recv_until(rx1, 1, timeout=5)
        assert len(got) == 1 and got[0][1][:15] == out[:15]
        rx1.send(frame(b"C"))
        assert got_in.wait(5)
    assert packet_ins[0][:15] == frame(b"C")[:15]


def test_idle_switch_does_not_wake_up(net):
    """With nothing to forward and no timer due, the loop sleeps in select: its thread
    runs at most for a stray frame the kernel itself puts on a veth, where a loop that
    polled on its quantum would run thousands of times in the second (`make bench`:
    switch_idle_cpu_frac, its CPU; `testkit.IDLE_WAKEUPS`)."""
    running = Running(net, WireEngine(), port_rates={2: 1e6})
    with running:
        tid = running.thread.native_id
        wait_for("the loop to settle in its wait", lambda: settled(tid), 5)
        before = context_switches(tid)
        time.sleep(1.0)  # idleness is what is measured: there is nothing to wait for
        woke = context_switches(tid) - before
    assert woke <= IDLE_WAKEUPS


class SlowEngine(WireEngine):
    """A pipeline that needs 1 ms per packet: the switch cannot keep up with 5 kpps."""

    def run_ingress(self, port: int, data: bytes) -> list[Job]:
        time.sleep(0.001)
        return super().run_ingress(port, data)


def test_falling_behind_is_logged(net, caplog):
    tx = net.socket("h1", net.ifaces["h1"])
    caplog.set_level("WARNING", logger="p4sim.switch.device")
    with Running(net, SlowEngine()):
        for _ in range(1500):
            tx.send(frame(b"S"))
        end = time.monotonic() + 10
        while "input backlog" not in caplog.text and time.monotonic() < end:
            time.sleep(0.02)
    assert "the switch is not keeping up" in caplog.text


def test_link_down_and_up_does_not_stop_the_switch(net):
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    with Running(net, WireEngine()) as dev:
        for iface in (net.ifaces["s1"], net.ifaces["s2"]):
            net.run("sw", "ip", "link", "set", iface, "down")
            net.run("sw", "ip", "link", "set", iface, "up")
        got: list = []
        end = time.monotonic() + 10
        while not got and time.monotonic() < end:  # until the links carry frames again
            tx.send(frame(b"L"))
            got = recv_until(rx, 1, timeout=0.2)
        assert got and dev.counters["pipeline_errors"] == 0


def test_queue_rate_limits_packets_per_second(net):
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    with Running(net, WireEngine(), queue_rate_pps=1000, queue_depth=300):
        for i in range(200):
            tx.send(frame(b"P" + bytes([i]), 60))
        got = recv_until(rx, 200, timeout=5)
    assert len(got) == 200
    times = [t for t, _ in got]
    assert (len(times) - 1) / (times[-1] - times[0]) == pytest.approx(1000, rel=0.05)


def test_replacing_the_pipeline_drops_packets_queued_by_the_old_one(net):
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    with Running(net, WireEngine(), port_rates={2: 2_000.0}) as dev:  # 500 ms a packet
        for i in range(20):
            tx.send(frame(b"O" + bytes([i]), 1000))
        received = recv_until(rx, 1, timeout=5)
        end = time.monotonic() + 5
        while dev.counters["rx"] < 20 and time.monotonic() < end:  # all in the queue
            time.sleep(0.01)
        with dev.lock:
            queued = dev.queue_stats()[2]["qdepth"]
            dev.install(WireEngine())  # a new program: the old one's queued packets are stale
        assert queued > 10
        tx.send(frame(b"N"))
        while not received or received[-1][1][14:15] != b"N":
            more = recv_until(rx, 1, timeout=5)
            assert more, "the new pipeline's packet did not arrive"
            received += more
    old = [d for _, d in received if d[14:15] == b"O"]
    # Only the packets that had left before the swap arrived; the queued ones were dropped.
    assert len(old) + queued == 20
    assert dev.counters["stale_after_reload"] == queued


def test_frames_larger_than_a_ring_slot_are_received_whole():
    with Netns() as n:
        ifaces = n.add_switch_and_hosts(mtu=16000)
        tx, rx = n.socket("h1", ifaces["h1"]), n.socket("h2", ifaces["h2"])
        # Interleaved: the ring keeps their order. A 9000-byte-MTU jumbo frame (9014
        # bytes) fits a ring slot; only the 12000-byte one takes the socket's queue.
        sizes = [100, 3000, 9014, 12000, 200, 5000]
        with Running(n, WireEngine()):
            for i, size in enumerate(sizes):
                tx.send(frame(b"J" + bytes([i]), size))
            got = recv_until(rx, len(sizes), timeout=5)
        assert [(d[15], len(d)) for _, d in got] == list(enumerate(sizes))


def port_batches(port: InterfacePort, count: int, timeout: float) -> list[bytes]:
    """Frames from ``port``'s ring until ``count`` arrived or ``timeout``."""
    got: list[bytes] = []
    end = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < end:
        select.select([port], [], [], 0.05)
        got += port.recv_batch(count - len(got))[0]
    return got


def test_ports_opened_at_once_come_in_order_and_a_bad_one_closes_the_rest():
    """`open_ports` (a device's ports on threads, in the namespace of the thread that
    asks): the ports in the order asked; one interface missing raises its PortError and
    leaves no socket of the others open. `close_ports` closes every one (on threads)."""
    fds = lambda: len(os.listdir("/proc/self/fd"))  # noqa: E731
    with Netns() as n:
        n.add_ns("a")
        n.add_ns("b")
        links = [n.add_link("a", "b") for _ in range(3)]
        with n.entered("b"):
            before = fds()
            ports = open_ports([{"number": k + 1, "iface": ib} for k, (_, ib) in enumerate(links)])
            try:
                assert [(p.number, p.iface) for p in ports] == [(k + 1, ib) for k, (_, ib) in enumerate(links)]
            finally:
                close_ports(ports)          # side by side, as they opened
            assert fds() == before and all(p.fileno() == -1 for p in ports)
            with pytest.raises(PortError, match="port 2: cannot open interface 'nosuch0'"):
                open_ports([{"number": 1, "iface": links[0][1]}, {"number": 2, "iface": "nosuch0"},
                            {"number": 3, "iface": links[2][1]}])
            assert fds() == before


def test_ring_slots_hold_jumbo_frames():
    """A 9000-byte-MTU frame is read from a ring slot like a small one; only a larger
    frame goes the slow way, through the socket's queue."""
    with Netns() as n:
        n.add_ns("a")
        n.add_ns("b")
        ia, ib = n.add_link("a", "b", mtu=16000)
        with n.entered("b"):
            port = InterfacePort(1, ib)
        tx = n.socket("a", ia)
        try:
            sizes = [9014] * 50 + [12000, 60]
            for i, size in enumerate(sizes):
                tx.send(frame(b"J" + bytes([i]), size))
            got = [d for d in port_batches(port, len(sizes), 5) if d[12:14] == ETHERTYPE]
        finally:
            port.close()
            tx.close()
    assert [(d[15], len(d)) for d in got] == list(enumerate(sizes))
    assert port.rx_copied == 1


class PassEngine:
    """Port 1 <-> port 2, frames unchanged."""

    def run_ingress(self, port: int, data: bytes) -> list[Job]:
        return [Job(2 if port == 1 else 1, 0, data)]

    def run_egress(self, job: Job, *queueing: int) -> tuple[list[tuple[int, bytes]], list[Job]]:
        return [(job.port, job.data)], []


def run_py(net: Netns, host: str, code: str) -> subprocess.Popen:
    return subprocess.Popen([*net.exec_prefix(host), sys.executable, "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_hosts_kernel_traffic_with_checksum_offload_crosses_the_switch(net, caplog):
    # veths offload TCP/UDP checksums by default: without the port completing them,
    # h2's kernel would drop every datagram and segment from h1's kernel.
    net.run("h1", "ip", "addr", "add", "10.9.0.1/24", "dev", net.ifaces["h1"])
    net.run("h2", "ip", "addr", "add", "10.9.0.2/24", "dev", net.ifaces["h2"])
    net.run("h1", "ethtool", "-K", net.ifaces["h1"], "tso", "off", "gso", "off")
    caplog.set_level("WARNING", logger="p4sim.switch.ports")
    with Running(net, PassEngine()):
        server = run_py(net, "h2", textwrap.dedent("""
            import socket
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.9.0.2", 5000))
            u.settimeout(20); print("udp", u.recv(100).decode(), flush=True)
            t = socket.socket(); t.bind(("10.9.0.2", 5001)); t.listen(); c, _ = t.accept()
            total = 0
            while data := c.recv(65536):
                total += len(data)
            print("tcp", total, flush=True)
        """))
        client = run_py(net, "h1", textwrap.dedent("""
            import socket, time
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            t = None
            for _ in range(100):  # until the server listens: each try also resends the datagram
                u.sendto(b"hello", ("10.9.0.2", 5000))
                try:
                    t = socket.create_connection(("10.9.0.2", 5001), timeout=5)
                    break
                except ConnectionRefusedError:
                    time.sleep(0.1)
            t.sendall(b"x" * 300000)
            t.close()
        """))
        out, err = server.communicate(timeout=30)
        client.communicate(timeout=30)
    assert "udp hello" in out and "tcp 300000" in out, err
    assert "segmentation offload" not in caplog.text


def test_segmentation_offload_is_reported(net, caplog):
    net.run("h1", "ip", "addr", "add", "10.9.0.1/24", "dev", net.ifaces["h1"])
    net.run("h2", "ip", "addr", "add", "10.9.0.2/24", "dev", net.ifaces["h2"])
    caplog.set_level("WARNING", logger="p4sim.switch.ports")
    with Running(net, PassEngine()):
        # TSO needs an established connection; the SYN gets through, the data does not.
        server = run_py(net, "h2", "import socket; t = socket.socket(); t.bind(('10.9.0.2', 5001)); "
                                   "t.listen(); c, _ = t.accept(); c.settimeout(5); c.recv(10)")
        client = run_py(net, "h1", textwrap.dedent("""
            import socket, time
            for _ in range(100):
                try:
                    t = socket.create_connection(("10.9.0.2", 5001), timeout=5)
                    break
                except ConnectionRefusedError:
                    time.sleep(0.1)
            t.sendall(b"x" * 200000)
            time.sleep(1)
        """))
        end = time.monotonic() + 10
        while "segmentation offload" not in caplog.text and time.monotonic() < end:
            time.sleep(0.05)
        for proc in (client, server):
            proc.kill()
            proc.wait()
    assert "turn it off there (ethtool -K <host-iface> tso off gso off)" in caplog.text


def test_frames_carry_their_kernel_arrival_time():
    """recv_batch gives each frame the time it arrived (CLOCK_MONOTONIC ns), not the
    time it was read: frames read 50 ms after they were sent say when they were sent."""
    with Netns() as n:
        n.add_ns("a")
        n.add_ns("b")
        ia, ib = n.add_link("a", "b")
        with n.entered("b"):
            port = InterfacePort(1, ib)
        tx = n.socket("a", ia)
        try:
            sent = []
            for i in range(5):
                sent.append(time.monotonic_ns())
                tx.send(frame(b"T" + bytes([i])))
                time.sleep(0.01)
            time.sleep(0.05)   # the frames wait in the ring
            read_at = time.monotonic_ns()
            frames, stamps = [], []
            end = time.monotonic() + 5
            while len(frames) < 5 and time.monotonic() < end:
                select.select([port], [], [], 0.05)
                got, at, _ = port.recv_batch(16)
                keep = [k for k, d in enumerate(got) if d[12:14] == ETHERTYPE]
                frames += [got[k] for k in keep]
                stamps += [at[k] for k in keep]
        finally:
            port.close()
            tx.close()
    assert [d[15] for d in frames] == list(range(5))
    for before, stamp in zip(sent, stamps):
        # Stamped when the kernel took the frame in: not before it was sent, and long
        # before it was read (the last frame was sent 60 ms before the read).
        assert before <= stamp < read_at - 40_000_000
    assert stamps == sorted(stamps)


# ---- priority flow control on the wire ------------------------------------------------

LOSSLESS = 3


class LosslessWire(WireEngine):
    """WireEngine putting every packet on the lossless priority."""

    def run_ingress(self, port: int, data: bytes) -> list[Job]:
        return [Job(j.port, LOSSLESS, j.data) for j in super().run_ingress(port, data)]


def pause_frames(sock, count: int, timeout: float) -> list[Ether]:
    """PFC frames arriving on ``sock``, decoded by Scapy's MACControl layers."""
    return [Ether(d) for _, d in receive(sock, count, timeout, lambda d: d[12:14] == b"\x88\x08")]


def test_pfc_pauses_the_sender_on_the_wire_and_loses_nothing(net, tmp_path):
    """h1 bursts 12 frames of 1000 bytes into a 25 kB/s port with a 2-packet queue: above
    XOFF (3000 bytes) the switch pauses h1 on priority 3, resumes it at XON, and every
    frame arrives. A PAUSE from h2 is the MAC's: counted, never forwarded."""
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    pfc = PfcConfig(frozenset({LOSSLESS}), xoff=3000, xon=1000, headroom=10_000)
    with Running(net, LosslessWire(), priority_queues=8, queue_depth=2, port_rates={2: 25_000.0},
                 pcap_dir=str(tmp_path), pfc=pfc) as dev:
        for i in range(12):
            tx.send(frame(b"P" + bytes([i]), 1000))
        xoff, xon = pause_frames(tx, 2, timeout=15)
        got = recv_until(rx, 12, timeout=15)
        h2_pause = pfc_frame(bytes.fromhex("020000000002"), {LOSSLESS: 0})
        rx.send(h2_pause)
        wait_for("the MAC control frame counted", lambda: dev.counters["mac_control"] == 1, 10)
        stats = dev.queue_stats()
    assert [d[15] for _, d in got] == list(range(12))
    for pkt, quanta in ((xoff, MAX_QUANTA), (xon, 0)):
        pfc_layer = pkt[MACControlClassBasedFlowControl]
        assert pkt.dst == "01:80:c2:00:00:01" and pkt.src == mac_of(net, "sw", net.ifaces["s1"])
        assert (pfc_layer.c3_enabled, pfc_layer.c3_pause_time, pfc_layer.c0_enabled) == (1, quanta, 0)
    assert stats[1]["pfc"]["pause_tx"][LOSSLESS] == 2 and stats[2]["drops"] == 0
    assert stats[2]["pfc"]["pause_rx"][LOSSLESS] == 1
    # The switch's capture of port 1 holds its PAUSE frames as sent; h2's PAUSE never
    # left through port 1.
    sent = [p for p in rdpcap(str(tmp_path / f"{net.ifaces['s1']}_out.pcap")) if MACControl in p]
    assert [p[MACControlClassBasedFlowControl].c3_pause_time for p in sent] == [MAX_QUANTA, 0]


def test_pause_storm_trips_the_watchdog(net, caplog):
    """h2 keeps pausing priority 3 every 20 ms: after the watchdog's 150 ms the switch
    discards the queue and whatever comes for it, logs the storm, and once the PAUSEs
    stop for 150 ms the queue is lossless again and forwards."""
    tx, rx = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    pfc = PfcConfig(frozenset({LOSSLESS}), xoff=50_000, xon=10_000, headroom=10_000, watchdog_us=150_000)
    storm = pfc_frame(bytes.fromhex("020000000002"), {LOSSLESS: MAX_QUANTA})
    with Running(net, LosslessWire(), priority_queues=8, port_rates={2: 1_000_000.0}, pfc=pfc) as dev:
        rx.send(storm)
        wait_for("the PAUSE received", lambda: dev.queue_stats()[2]["pfc"]["pause_rx"][LOSSLESS] == 1, 10)
        for i in range(5):
            tx.send(frame(b"S" + bytes([i]), 1000))
        end = time.monotonic() + 5
        while not dev.queue_stats()[2]["pfc"]["storms"] and time.monotonic() < end:
            rx.send(storm)
            time.sleep(0.02)
        during = dev.queue_stats()[2]["pfc"]
        assert during["storms"] == 1 and during["storm"][LOSSLESS] and during["storm_drops"] == 5
        assert recv_until(rx, 1, timeout=0.3) == []           # paused, then discarded
        wait_for("the storm over", lambda: not dev.queue_stats()[2]["pfc"]["storm"][LOSSLESS], 10)   # PAUSEs stopped
        tx.send(frame(b"T", 1000))
        assert len(recv_until(rx, 1, timeout=5)) == 1
    assert any("pause storm" in r.getMessage() for r in caplog.records)


def mac_of(net, ns: str, iface: str) -> str:
    return net.run(ns, "cat", f"/sys/class/net/{iface}/address").stdout.strip()
