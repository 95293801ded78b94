"""PFC in the traffic manager on emulated time: XOFF/XON from per-ingress accounting,
headroom, pause quanta at the port's rate, XOFF refresh, the watchdog; and the PAUSE
frame layout as Scapy's MACControl layers decode it."""

from __future__ import annotations

import pytest
from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause
from scapy.layers.l2 import Ether

from p4sim.switch.command import UsageError, build_parser, parse_pfc
from p4sim.switch.pause import MAX_QUANTA, parse_pause, pfc_frame
from p4sim.switch.pfc import PfcConfig
from p4sim.switch.traffic_manager import Dequeued, TrafficManager

LOSSLESS = 3
SIZE = 1000
RATE = 1_250_000.0   # bytes/s: 10 Mbit/s, 512 bit times = 51.2 us


class FakeClock:
    """Emulated microseconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def make(watchdog_us: float = 0.0, depth: int = 2):
    clock = FakeClock()
    tm = TrafficManager(clock, priorities=8, depth=depth,
                        pfc=PfcConfig(frozenset({LOSSLESS}), xoff=3 * SIZE, xon=SIZE,
                                      headroom=2 * SIZE, watchdog_us=watchdog_us))
    sent: list[tuple[int, int, dict[int, int]]] = []
    tm.send_pause = lambda port, quanta: sent.append((clock.now, port, quanta))
    for port in (1, 2, 3):
        tm.set_port_rate(port, RATE)
    return clock, tm, sent


def transmit_log(clock: FakeClock, out: list):
    def transmit(d: Dequeued) -> int:
        out.append((clock.now, d.port, d.priority, d.item))
        return SIZE
    return transmit


def test_xoff_above_threshold_headroom_then_drop_and_no_egress_tail_drop():
    clock, tm, sent = make(depth=2)
    admitted = [tm.enqueue(2, LOSSLESS, k, size=SIZE, in_port=1) for k in range(6)]
    # 3 packets reach XOFF; 2 more fit the headroom; the 6th overflows it. The egress
    # depth (2 packets) does not apply to the lossless queue.
    assert admitted == [True] * 5 + [False]
    assert sent == [(1000, 1, {LOSSLESS: MAX_QUANTA})]
    pfc = tm.stats()[1]["pfc"]
    assert pfc["pause_tx"][LOSSLESS] == 1 and pfc["xoff"][LOSSLESS] and pfc["headroom_drops"] == 1
    assert pfc["ingress_bytes"][LOSSLESS] == 5 * SIZE
    # A lossy priority keeps its tail drop at the egress depth.
    assert [tm.enqueue(2, 0, k, size=SIZE, in_port=1) for k in range(3)] == [True, True, False]


def test_xon_resume_when_the_ingress_drains():
    clock, tm, sent = make()
    for k in range(4):
        tm.enqueue(2, LOSSLESS, k, size=SIZE, in_port=1)
    out: list = []
    while tm.backlog():
        tm.service(transmit_log(clock, out))
        clock.now = tm.next_deadline() or clock.now
    # XOFF at the 3rd packet; resume once 1000 bytes (XON) are left, after 3 departures.
    assert [q for _, _, q in sent] == [{LOSSLESS: MAX_QUANTA}, {LOSSLESS: 0}]
    third_departure = out[2][0]
    assert sent[1][0] == third_departure
    assert tm.stats()[1]["pfc"]["xoff"][LOSSLESS] is False


def test_received_pause_stops_the_queue_for_its_quanta_at_the_port_rate():
    clock, tm, _ = make()
    tm.receive_pause(2, {LOSSLESS: 100})       # 100 x 512 bit times at 10 Mbit/s = 5120 us
    tm.enqueue(2, LOSSLESS, "lossless", size=SIZE, in_port=1)
    tm.enqueue(2, 6, "cnp", size=SIZE, in_port=1)   # another priority is not paused
    out: list = []
    tm.service(transmit_log(clock, out))
    assert [item for _, _, _, item in out] == ["cnp"]
    clock.now = tm.next_deadline()
    tm.service(transmit_log(clock, out))
    assert out[-1][3] == "lossless" and out[-1][0] == 1000 + 5120 + 1
    assert tm.stats()[2]["pfc"]["paused_s"][LOSSLESS] == pytest.approx(5120e-6)
    assert tm.stats()[2]["pfc"]["pause_rx"][LOSSLESS] == 1


def test_resume_ends_a_pause_early_and_lossy_priorities_ignore_pause():
    clock, tm, _ = make()
    tm.receive_pause(2, {LOSSLESS: MAX_QUANTA, 0: MAX_QUANTA})
    tm.enqueue(2, LOSSLESS, "a", size=SIZE, in_port=1)
    tm.enqueue(2, 0, "lossy", size=SIZE, in_port=1)
    out: list = []
    tm.service(transmit_log(clock, out))
    assert [o[3] for o in out] == ["lossy"]     # priority 0 is not lossless: PAUSE ignored
    clock.now += 2000
    tm.receive_pause(2, {LOSSLESS: 0})
    tm.service(transmit_log(clock, out))
    assert out[-1][3] == "a" and out[-1][0] == 3000
    assert tm.stats()[2]["pfc"]["paused_s"][LOSSLESS] == pytest.approx(2000e-6)


def test_xoff_is_refreshed_before_the_pause_runs_out():
    clock, tm, sent = make()
    tm.receive_pause(2, {LOSSLESS: MAX_QUANTA})     # egress paused: the ingress stays above XOFF
    for k in range(3):
        tm.enqueue(2, LOSSLESS, k, size=SIZE, in_port=1)
    pause_us = MAX_QUANTA * 512 / 8 / RATE * 1e6
    assert tm.next_deadline() == int(1000 + pause_us / 2) + 1
    clock.now = tm.next_deadline()
    tm.service(transmit_log(clock, []))
    assert [q for _, _, q in sent] == [{LOSSLESS: MAX_QUANTA}] * 2


def test_pause_storm_trips_the_watchdog_then_restores():
    clock, tm, _ = make(watchdog_us=50_000)
    for k in range(3):
        tm.enqueue(2, LOSSLESS, k, size=SIZE, in_port=1)
    out: list = []
    # A peer that keeps pausing, every 10 ms (each pause lasts 3.3 s).
    while clock.now < 100_000:
        tm.receive_pause(2, {LOSSLESS: MAX_QUANTA})
        tm.service(transmit_log(clock, out))
        clock.now += 10_000
    st = tm.stats()
    assert out == [] and st[2]["pfc"]["storms"] == 1 and st[2]["pfc"]["storm"][LOSSLESS]
    assert st[2]["pfc"]["storm_drops"] == 3 and st[2]["drops"] == 3 and st[2]["qdepth"] == 0
    assert st[1]["pfc"]["ingress_bytes"][LOSSLESS] == 0      # accounting released
    assert not tm.enqueue(2, LOSSLESS, "x", size=SIZE, in_port=1)   # discarded during the storm
    # The PAUSEs stop: after the watchdog time the queue is lossless again.
    clock.now = tm.next_deadline()
    tm.service(transmit_log(clock, out))
    assert not tm.stats()[2]["pfc"]["storm"][LOSSLESS]
    assert tm.enqueue(2, LOSSLESS, "y", size=SIZE, in_port=1)
    tm.service(transmit_log(clock, out))
    assert out[-1][3] == "y"


def test_pfc_needs_a_queue_per_lossless_priority():
    with pytest.raises(ValueError, match="--priority-queues 4"):
        TrafficManager(FakeClock(), priorities=1, pfc=PfcConfig(frozenset({3}), 100, 50, 0))
    with pytest.raises(ValueError, match="xon"):
        PfcConfig(frozenset({3}), xoff=100, xon=100, headroom=0)


def test_pfc_frame_decodes_with_scapy_mac_control():
    frame = pfc_frame(bytes.fromhex("020000000001"), {3: MAX_QUANTA, 6: 0})
    pkt = Ether(frame)
    pfc = pkt[MACControlClassBasedFlowControl]
    assert pkt.dst == "01:80:c2:00:00:01" and pkt.type == 0x8808 and len(frame) == 60
    assert (pfc.c3_enabled, pfc.c3_pause_time, pfc.c6_enabled, pfc.c6_pause_time, pfc.c0_enabled) == \
        (1, MAX_QUANTA, 1, 0, 0)
    assert parse_pause(frame) == {3: MAX_QUANTA, 6: 0}
    classic = bytes(Ether(src="02:00:00:00:00:02", dst="01:80:c2:00:00:01") / MACControlPause(pause_time=7))
    assert parse_pause(classic) == {p: 7 for p in range(8)}


def test_switch_flags_build_the_pfc_config():
    parse = build_parser().parse_args
    assert parse_pfc(parse(["--no-p4"])) is None
    assert parse_pfc(parse(["--no-p4", "--pfc", "3,4", "--pfc-xoff", "9000", "--pfc-xon", "3000",
                            "--pfc-headroom", "5000", "--pfc-watchdog-ms", "200"])) == \
        PfcConfig(frozenset({3, 4}), 9000, 3000, 5000, 200_000.0)
    for flags, words in ((["--pfc", "three"], "expected priorities"), (["--pfc", "8"], "0..7"),
                         (["--pfc", "3", "--pfc-xon", "99999"], "xon")):
        with pytest.raises(UsageError, match=words):
            parse_pfc(parse(["--no-p4", *flags]))


def test_a_long_pause_of_an_empty_queue_leaves_no_timer_in_the_past():
    """A queue paused longer than the watchdog bound while empty did not storm; once
    resumed and sending, its next deadline is the link's, not the watchdog's (a past
    deadline would make the device loop spin at real-time priority)."""
    clock, tm, _ = make(watchdog_us=200_000)
    tm.receive_pause(2, {LOSSLESS: MAX_QUANTA})
    clock.now += 300_000
    tm.receive_pause(2, {LOSSLESS: 0})
    for k in range(2):
        tm.enqueue(2, LOSSLESS, k, size=SIZE, in_port=1)
    out: list = []
    tm.service(transmit_log(clock, out))
    assert [o[3] for o in out] == [0]
    assert tm.next_deadline() == clock.now + 800 + 1       # the second frame, a serialisation later
    assert tm.stats()[2]["pfc"]["storms"] == 0


def test_other_and_cut_short_mac_control_frames_ask_for_nothing():
    frame = pfc_frame(bytes(6), {3: 9})
    assert parse_pause(frame[:20]) is None            # cut inside the class-enable vector's times
    assert parse_pause(frame[:12] + b"\x08\x00" + frame[14:]) is None   # not MAC control
    gate = bytearray(frame)
    gate[14:16] = b"\x00\x02"                          # GATE (EPON): a MAC control frame, not a pause
    assert parse_pause(bytes(gate)) is None
    with pytest.raises(ValueError, match="0..7"):
        pfc_frame(bytes(6), {8: 1})
