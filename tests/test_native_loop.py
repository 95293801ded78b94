"""The native device loop (p4sim/switch/native/loop.c) against the Python Device, the
reference: the same pipeline (tests/device_fixtures/two_port_qdepth.json, generated in
C for the native device, whose egress writes enq_qdepth into each frame), the same
frames on veths in namespaces, and the frames out, their order per port, the counters
and the queue stats compared. The C that reads frames, on hostile input and without
namespaces, is tested beside it (tests/test_native_frames.py)."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from emulation.clock import EmulationClock
from netns import receive
from p4sim.switch.device import Device
from p4sim.switch.native.device import NativeDevice, run_devices
from p4sim.switch.native.libswitch import load
from p4sim.switch.pause import MAX_QUANTA, parse_pause, pfc_frame
from p4sim.switch.pfc import PfcConfig
from p4sim.switch.ports import RING_FRAMES
from testkit import DeviceLoop, wait_for
from topo.namespaces import Netns

FIXTURE = Path(__file__).parent / "device_fixtures" / "two_port_qdepth.json"
DPORT = 4791
root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def udp(seq: int, size: int = 200, tos: int = 0) -> bytes:
    pkt = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:02:02") / \
        IP(src="10.0.1.1", dst="10.0.2.2", tos=tos) / UDP(sport=10000 + seq, dport=DPORT)
    return bytes(pkt / Raw(bytes(max(0, size - len(pkt)))))


def ours(frame: bytes) -> bool:
    return len(frame) > 37 and frame[12:14] == b"\x08\x00" and frame[36:38] == DPORT.to_bytes(2, "big")


# ---- the loop on veths, against the Python device


class Running(DeviceLoop):
    """A device of ``kind`` in the switch namespace with the fixture's pipeline in the
    engine ``engine``, its loop on a thread; always stopped and closed."""

    def __init__(self, net: Netns, kind: type, engine: str, **kwargs) -> None:
        with net.entered("sw"):
            super().__init__(kind({1: net.ifaces["s1"], 2: net.ifaces["s2"]}, engine=engine, **kwargs))

    def __enter__(self):
        try:
            self.device.load_pipeline(json.loads(FIXTURE.read_text()))
        except BaseException:
            self.device.close()
            raise
        return super().__enter__()


# 100 ms a frame on port 2 with a queue of 8: `drive`'s burst (well under a millisecond)
# is all queued or dropped before the second frame leaves, so what each frame meets is
# the same in every run: enq_qdepth 0, 0, 1, ..., 7 written into the frames, then tail drops.
# At 40 ms a frame, a suite run (2026-12-07, the other worker compiling) once had one
# more frame leave during the two devices' bursts: the test process was off the CPU
# (or the driving threads waited on the interpreter lock) for that long.
SLOW_PORT_2 = {"port_rates": {2: 2_000.0}, "queue_depth": 8}


def drive(net: Netns, dev) -> dict:
    """Bursts both ways through the running device's slow port 2 (SLOW_PORT_2), a
    PacketOut injected on port 1: the frames out and the queue stats."""
    h1, h2 = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
    burst, back = [udp(i) for i in range(24)], [udp(100 + i, 300) for i in range(5)]
    for frame in burst:
        h1.send(frame)
    for frame in back:
        h2.send(frame)
    at_h2 = receive(h2, 9, 5.0, ours)
    at_h1 = receive(h1, 5, 5.0, ours)
    dev.inject(udp(200, 120), port=1)
    at_h2 += receive(h2, 1, 5.0, ours)
    time.sleep(0.2)                # nothing more arrives: a late extra frame would be a bug
    at_h2 += receive(h2, 1, 0.1, ours)
    with dev.lock:
        stats = {p: {k: s[k] for k in ("enqueued", "drops", "sent_packets", "sent_bytes", "max_qdepth")}
                 for p, s in dev.queue_stats().items()}
    return {"h2": [d for _, d in at_h2], "h1": [d for _, d in at_h1], "stats": stats}


def with_counters(driven: dict, counters: dict[str, int]) -> dict:
    return {**driven, "counters": {k: v for k, v in counters.items() if k not in ("rx",)}, "rx": counters["rx"]}


def exchange(kind: type, engine: str) -> dict:
    """`drive` on a device of ``kind`` alone, then everything the device did."""
    with Netns() as net:
        net.add_switch_and_hosts()
        with Running(net, kind, engine, **SLOW_PORT_2) as dev:
            driven = drive(net, dev)
    return with_counters(driven, dev.counters)


class Together:
    """Native devices with the fixture's pipeline on one loop thread (`run_devices`,
    as `p4sim switches` runs them); always stopped and closed."""

    def __init__(self, devices: list[NativeDevice]) -> None:
        self.devices = devices
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            run_devices(self.devices)
        except BaseException as e:  # reported by __exit__
            self.error = e

    def __enter__(self) -> list[NativeDevice]:
        try:
            for device in self.devices:
                device.load_pipeline(json.loads(FIXTURE.read_text()))
        except BaseException:
            self._close()
            raise
        self.thread.start()
        return self.devices

    def _close(self) -> None:
        for device in self.devices:
            device.close()

    def __exit__(self, *exc) -> None:
        for device in self.devices:
            device.stop()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the shared loop did not stop"
        self._close()
        if self.error is not None:
            raise AssertionError("the shared loop crashed") from self.error


def native_on(net: Netns, device_id: int, clock: EmulationClock, **kwargs) -> NativeDevice:
    with net.entered("sw"):
        return NativeDevice({1: net.ifaces["s1"], 2: net.ifaces["s2"]}, engine="native",
                            device_id=device_id, clock=clock, **kwargs)


@root
def test_one_loop_thread_forwards_for_two_devices_what_each_forwards_alone():
    """`run_devices` (`p4sim switches`): two devices driven at once on one loop thread
    each forward, queue, drop and count exactly what one device alone does."""
    alone = exchange(NativeDevice, "native")
    clock = EmulationClock.start()
    with Netns() as a, Netns() as b:
        a.add_switch_and_hosts()
        b.add_switch_and_hosts()
        with Together([native_on(a, 1, clock, **SLOW_PORT_2), native_on(b, 2, clock, **SLOW_PORT_2)]) as devices:
            with ThreadPoolExecutor(2) as pool:
                driven = list(pool.map(drive, (a, b), devices))
            threads = len(threads_named("p4n-loop"))
        together = [with_counters(d, dev.counters) for d, dev in zip(driven, devices)]
    assert threads == 1
    for got in together:
        assert {k: v for k, v in got.items() if k != "rx"} == {k: v for k, v in alone.items() if k != "rx"}
        assert got["rx"] >= 30


@root
def test_a_device_stopped_in_a_shared_loop_stops_alone():
    """One of two devices on one loop thread stopped: its rings are no longer read (a
    frame to it is not received), and the other forwards on."""
    clock = EmulationClock.start()
    with Netns() as a, Netns() as b:
        a.add_switch_and_hosts()
        b.add_switch_and_hosts()
        with Together([native_on(a, 1, clock), native_on(b, 2, clock)]) as (dev_a, dev_b):
            a1, a2 = a.socket("h1", a.ifaces["h1"]), a.socket("h2", a.ifaces["h2"])
            b1, b2 = b.socket("h1", b.ifaces["h1"]), b.socket("h2", b.ifaces["h2"])
            a1.send(udp(1))
            assert len(receive(a2, 1, 5.0, ours)) == 1
            dev_a.stop()

            def through_b(seq: int) -> None:
                b1.send(udp(seq))
                assert len(receive(b2, 1, 5.0, ours)) == 1
            # Each frame through b is one more wake-up of the loop; by the second, a is out.
            through_b(2)
            through_b(3)
            rx = dev_a.counters["rx"]
            a1.send(udp(4))
            through_b(5)
            assert dev_a.counters["rx"] == rx
            assert receive(a2, 1, 0.2, ours) == []


@root
def test_native_loop_forwards_what_the_python_device_forwards():
    python = exchange(Device, "python")
    native = exchange(NativeDevice, "native")
    # The one on the wire, the 8 queued, then the PacketOut; the rest of the burst dropped.
    assert len(python["h2"]) == 10 and len(python["h1"]) == 5 and python["stats"][2]["drops"] == 15
    assert [f[19] for f in python["h2"][:9]] == [0, 0, 1, 2, 3, 4, 5, 6, 7]
    assert native["h2"] == python["h2"]
    assert native["h1"] == python["h1"]
    assert native["stats"] == python["stats"]
    assert native["counters"] == python["counters"]
    # rx: the same frames, plus whatever else the hosts' kernels sent (IPv6 router
    # solicitations), which the pipeline drops.
    assert native["rx"] >= 30 and python["rx"] >= 30


@root
def test_native_loop_obeys_pause_and_sends_pause():
    """A PFC frame from h2 stops port 2's lossless queue; the backlog from h1 then
    crosses XOFF and the switch pauses h1."""
    with Netns() as net:
        net.add_switch_and_hosts()
        h1, h2 = net.socket("h1", net.ifaces["h1"]), net.socket("h2", net.ifaces["h2"])
        pfc = PfcConfig(frozenset({3}), xoff=1000, xon=400, headroom=4000)
        with Running(net, NativeDevice, "native", port_rates={1: 125_000.0, 2: 125_000.0},
                     priority_queues=8, pfc=pfc) as dev:
            h2.send(pfc_frame(b"\x02\x00\x00\x00\x02\x02", {3: 2000}))   # 2000 x 512 bits at 1 Mbit/s: ~1 s
            end = time.monotonic() + 5
            while dev.counters["mac_control"] < 1 and time.monotonic() < end:
                time.sleep(0.01)
            for i in range(8):
                h1.send(udp(i, 300, tos=3 << 2))   # the fixture: priority = dscp & 7
            pauses = receive(h1, 1, 5.0, lambda f: f[12:14] == b"\x88\x08")
            assert [parse_pause(f) for _, f in pauses] == [{3: MAX_QUANTA}]
            end, held = time.monotonic() + 0.5, 0   # well inside the pause: all 8 wait
            while held < 8 and time.monotonic() < end:
                with dev.lock:
                    held = dev.queue_stats()[2]["qdepth"]
                time.sleep(0.005)
            got = receive(h2, 8, 5.0, ours)         # released when the pause runs out
            with dev.lock:
                pfc_stats = dev.queue_stats()[2]["pfc"]
        assert held == 8 and len(got) == 8
        assert pfc_stats["pause_rx"][3] == 1 and pfc_stats["paused_s"][3] > 0.9


@root
def test_native_loop_rides_out_a_stall_deeper_than_the_python_ring_on_unpaced_ports():
    """With the loop held (the device lock: its CPU taken by something else), a burst of
    twice ports.py's ring arrives on an unpaced port; every frame is forwarded once the
    loop runs again, none lost in the kernel (NativeDevice.ring_blocks: a 448-slot ring
    loses all but 448)."""
    burst = 2 * RING_FRAMES
    with Netns() as net:
        net.add_switch_and_hosts()
        h1 = net.socket("h1", net.ifaces["h1"])
        with Running(net, NativeDevice, "native") as dev:
            with dev.lock:
                for i in range(burst):
                    h1.send(udp(i % 1000, 64))
            wait_for(f"{burst} frames received", lambda: dev.counters["rx"] >= burst, 10.0,
                     detail=lambda: f"rx={dev.counters['rx']} {dev.fidelity()['kernel_drops']} lost in the kernel")
            assert dev.fidelity()["kernel_drops"] == 0


def threads_named(name: str) -> list[int]:
    """The ids of this process's threads called ``name`` (their /proc comm)."""
    out = []
    for task in Path("/proc/self/task").iterdir():
        try:
            if (task / "comm").read_text().strip() == name:
                out.append(int(task.name))
        except FileNotFoundError:
            continue   # the thread ended meanwhile
    return out


@root
@pytest.mark.parametrize("kind", [NativeDevice, Device])
def test_loop_thread_runs_on_the_loop_cpu(kind):
    """``loop_cpu`` (`p4sim switch --loop-cpu`): the thread that runs the packet loop --
    the C loop's own thread, or the one calling the Python device's run -- may run on
    that core alone, and the rest of the process keeps every core."""
    everywhere = os.sched_getaffinity(0)
    cpu = max(everywhere)
    with Netns() as net:
        net.add_switch_and_hosts()
        running = Running(net, kind, "native" if kind is NativeDevice else "python", loop_cpu=cpu)
        with running:
            tid = (wait_for("the C loop's thread", lambda: threads_named("p4n-loop"), 5.0)[0]
                   if kind is NativeDevice else running.thread.native_id)
            wait_for(f"thread {tid} pinned to core {cpu}", lambda: os.sched_getaffinity(tid) == {cpu}, 5.0,
                     detail=lambda: f"allowed on {os.sched_getaffinity(tid)}")
            assert os.sched_getaffinity(0) == everywhere


def test_quantum_sleeps_end_on_the_clock_grid():
    """A loop's next wake-up is the first multiple of the quantum after it woke, so
    switches that woke at different times in one quantum wake together (one timer
    interrupt for all of them), never sooner than the grid point after their wake-up."""
    _, lib = load()
    q = 837.5   # a quarter of a 4 KiB frame's time at 10 Mbit/s, in us
    assert lib.p4n_next_wake_us(0, q) == q
    assert {lib.p4n_next_wake_us(w, q) for w in (3_351, 3_500, 4_187)} == {5 * q}
    assert lib.p4n_next_wake_us(4_188, q) == 6 * q   # 5 q = 4187.5: strictly after
    assert lib.p4n_next_wake_us(1_000, 0.0) == 1_000  # no paced port: no quantum


def to_cpu_device(net: Netns, got: list[tuple[float, bytes]]) -> NativeDevice:
    """A native device on h1's port whose pipeline's output (the fixture forwards port 1
    to port 2) goes to the CPU port, 2: PacketIns, appended to ``got`` with the time the
    handler was called."""
    with net.entered("sw"):
        device = NativeDevice({1: net.ifaces["s1"]}, engine="native", cpu_port=2)
    device.load_pipeline(json.loads(FIXTURE.read_text()))
    device.packet_in_handler = lambda data: got.append((time.monotonic(), data))
    return device


@root
def test_native_loop_hands_packet_ins_over_together(monkeypatch):
    """PacketIns wait in the C queue for the ones after them (PACKET_IN_INTERVAL_S
    emulated, here 0.5 s) and reach the handler together, in order: none before the
    interval is over, where handing each over at once reached the handler within
    milliseconds."""
    from p4sim.switch.native import device as native_device

    monkeypatch.setattr(native_device, "PACKET_IN_INTERVAL_S", 0.5)
    with Netns() as net:
        net.add_switch_and_hosts()
        h1 = net.socket("h1", net.ifaces["h1"])
        got: list[tuple[float, bytes]] = []
        with DeviceLoop(to_cpu_device(net, got)):
            sent = time.monotonic()
            for i in range(3):
                h1.send(udp(i))
            wait_for("three PacketIns", lambda: len([d for _, d in got if ours(d)]) == 3, 10.0)
    mine = [(t, d) for t, d in got if ours(d)]
    assert [d[34:36] for _, d in mine] == [(10000 + i).to_bytes(2, "big") for i in range(3)]
    assert min(t for t, _ in mine) >= sent + 0.5


@root
def test_native_loop_keeps_unheard_packet_ins_from_python():
    """With no controller to send them to (``packet_ins_heard`` False, as the P4Runtime
    server sets it) PacketIns are counted sent, as the handler's drop would be, and the
    handler is not called; heard again, they reach it."""
    with Netns() as net:
        net.add_switch_and_hosts()
        h1 = net.socket("h1", net.ifaces["h1"])
        got: list[tuple[float, bytes]] = []
        device = to_cpu_device(net, got)
        device.packet_ins_heard = False
        with DeviceLoop(device):
            for i in range(3):
                h1.send(udp(i))
            wait_for("three frames sent to the CPU port", lambda: device.counters["tx"] >= 3, 10.0)
            device.packet_ins_heard = True
            h1.send(udp(9))
            wait_for("the PacketIn heard", lambda: any(ours(d) for _, d in got), 10.0)
            counters = dict(device.counters)
    assert [d[34:36] for _, d in got if ours(d)] == [(10009).to_bytes(2, "big")]
    assert counters["packet_in_dropped"] == 0
