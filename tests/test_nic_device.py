"""The native NIC's device (tccl/nic/device.c) on fake receive rings: the ring reader,
arrival times, PFC, unknown QPs and frames that are not for it. No root needed."""

from __future__ import annotations

import os
import select
import time

import pytest

from nic_rings import FRAME_TIME, LINE_RATE, PARAMS, SLOTS, Device
from p4sim.switch.pause import pfc_frame, quanta_seconds
from tccl import roce
from tccl.nic import qp as native
from tccl.nic.qp import Completions, Requester, Responder

lib = native.lib


@pytest.fixture
def dev():
    d = Device(native, Completions, Requester, Responder)
    yield d
    d.close()


def test_data_is_delivered_and_acknowledged(dev):
    dev.data.push(dev.peer.frame(roce.SEND_FIRST, 0, b"hello "))
    dev.data.push(dev.peer.frame(roce.SEND_LAST, 1, b"world", ackreq=True))
    assert dev.receive() == 2
    assert dev.delivered == [b"hello world"]
    (ack,) = dev.sent()
    p = roce.parse(ack)
    assert (p.opcode, p.psn, p.dqpn) == (roce.ACKNOWLEDGE, 1, dev.peer_qpn) and roce.icrc_ok(ack)
    assert dev.c.rx_frames == 2 and dev.c.rx_ignored == 0


def test_frames_are_handled_at_their_arrival_time(dev):
    """Two CE-marked frames read in one call, stamped three CNP intervals apart: two
    CNPs (by the time they were read, they were not that far apart)."""
    interval = PARAMS.cnp_interval
    t0 = time.clock_gettime_ns(time.CLOCK_REALTIME) - int(10 * interval * 1e9)
    marked = roce.FrameTemplate(roce.Endpoint(dev.peer.src.mac, dev.peer.src.ip), dev.peer.dst, 50001,
                                dev.qpn, ecn=roce.ECN_CE)
    dev.data.push(marked.frame(roce.SEND_FIRST, 0, bytes(100)), t0)
    dev.data.push(marked.frame(roce.SEND_LAST, 1, bytes(100)), t0 + int(3 * interval * 1e9))
    dev.receive()
    stats = dev.resp.stats
    assert stats.ce_marked == 2 and stats.cnps_sent == 2
    assert stats.min_cnp_gap == pytest.approx(3 * interval, rel=1e-6)
    # Each frame's handling was timed from its stamp: ~10 intervals late for the first.
    late = dev.c.ports[0].rx_lateness
    assert late.max * dev.c.frame_time >= 9 * interval


def test_acks_and_cnps_reach_the_requester_at_arrival(dev):
    dev.req.post(bytes(3000), None, dev.now())
    dev.service(dev.now() + 1.0)
    data = dev.sent()
    # Paced: a second late, a QP makes up one frame time only (two frames, not 3).
    assert [roce.parse(f).psn for f in data] == [0, 1]
    stamp = time.clock_gettime_ns(time.CLOCK_REALTIME)
    dev.data.push(dev.peer.cnp(), stamp)
    dev.receive()
    assert dev.req.stats.cnps == 1 and dev.req.rate.rc < LINE_RATE
    assert dev.req.rate._c.next_timer == pytest.approx(dev.emulated(stamp) + PARAMS.rate_timer, abs=1e-4)
    dev.data.push(dev.peer.ack(0, 0))
    dev.receive()
    assert dev.req.una == 1


def test_a_timeout_resends_in_the_service_that_fires_it(dev):
    """Nothing acknowledged for an RTO and nothing else arriving: the go-back's frame
    leaves in the very service call that fires the timeout, not at the next wake-up."""
    t0 = dev.now()
    dev.req.post(bytes(500), None, t0)
    dev.service(t0)
    assert [roce.parse(f).psn for f in dev.sent()] == [0]
    due = dev.service(t0 + 1.5 * dev.req.rto)
    assert dev.req.stats.timeouts == 1
    assert [roce.parse(f).psn for f in dev.sent()] == [0]
    assert due == pytest.approx(t0 + 2.5 * dev.req.rto)     # the next timeout, an RTO on


def test_pfc_pause_holds_data_and_acks_not_cnps(dev):
    """A PAUSE of the RoCE priority holds the QP's data and the ACKs (same priority)
    until it runs out; a CNP (priority 6) still goes; a resume (0 quanta) ends it."""
    quanta = 0xFFFF
    dev.pause.push(pfc_frame(b"\x02" * 6, {3: quanta}))
    dev.receive()
    port = dev.c.ports[0]
    assert port.pause_rx == 1
    until = port.paused_until[3]
    assert until - dev.now() == pytest.approx(quanta_seconds(quanta, LINE_RATE), abs=0.05)
    dev.req.post(bytes(1000), None, dev.now())
    ce = roce.FrameTemplate(dev.peer.src, dev.peer.dst, 50001, dev.qpn, ecn=roce.ECN_CE)
    dev.data.push(ce.frame(roce.SEND_ONLY, 0, b"x", ackreq=True))
    dev.receive()
    due = dev.service()
    sent = dev.sent()
    assert [roce.parse(f).opcode for f in sent] == [roce.CNP]   # the ACK is held, no data
    assert due == pytest.approx(until)                          # wakes when the pause ends
    dev.pause.push(pfc_frame(b"\x02" * 6, {3: 0}))
    dev.receive()
    dev.service()
    assert sorted(roce.parse(f).opcode for f in dev.sent()) == [roce.SEND_ONLY, roce.ACKNOWLEDGE]
    assert 0 < port.paused_s < 1.0


def test_ring_wraps_and_every_slot_is_handed_back(dev):
    psn = 0
    for _ in range(3):
        for _ in range(SLOTS):
            assert dev.data.push(dev.peer.frame(roce.SEND_ONLY, psn, psn.to_bytes(4, "big")))
            psn += 1
        dev.receive()
    assert [int.from_bytes(m, "big") for m in dev.delivered] == list(range(3 * SLOTS))


def test_frames_not_for_this_nic_are_dropped_or_ignored(dev):
    good = dev.peer.frame(roce.SEND_ONLY, 0, b"ok")
    other_ip = roce.FrameTemplate(dev.peer.src, roce.Endpoint(dev.peer.dst.mac, "10.0.0.99"), 50001,
                                  dev.qpn).frame(roce.SEND_ONLY, 0, b"no")
    dev.data.push(good, pkttype=4)                    # our own transmission: dropped unread
    dev.data.push(good, snaplen=len(good) - 10)       # cut short by the slot: dropped
    dev.data.push(good, mac=9216 - 8)                 # a frame past its slot's end: dropped
    dev.data.push(good, status=1 | 1 << 4)            # VLAN-tagged: not ours
    dev.data.push(other_ip)                           # another host's: ignored
    dev.data.push(b"\x00" * 70)                       # not RoCE: ignored
    assert dev.receive() == 6
    assert dev.delivered == [] and dev.c.rx_ignored == 2 and dev.c.rx_frames == 2
    dev.data.push(good)
    dev.receive()
    assert dev.delivered == [b"ok"]


def test_a_frame_for_an_unknown_qp_waits_for_the_library(dev):
    stranger = roce.FrameTemplate(dev.peer.src, dev.peer.dst, 50001, dev.qpn + 7)
    dev.data.push(stranger.frame(roce.SEND_ONLY, 0, b"?"))
    dev.data.push(dev.peer.frame(roce.SEND_ONLY, 0, b"after"))
    assert dev.receive(skip_unknown=False) == 0
    assert dev.c.need_qpn == dev.qpn + 7 and dev.c.rx_frames == 0
    assert dev.receive(skip_unknown=False) == 0           # still there, nothing lost
    assert lib.nic_device_skip(dev.c) == 0
    dev.receive()
    assert dev.delivered == [b"after"] and dev.c.rx_ignored == 1
    assert lib.nic_device_skip(dev.c) == -1               # nothing to skip now


def wait_for(dev, done, timeout: float = 5.0) -> bool:
    """Wait for ``done()`` as the library does with the thread running: on the notify
    eventfd, reaping each time."""
    fd, deadline = lib.nic_device_notify_fd(dev.c), time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            os.read(fd, 8)
        dev.completions.reap()
    return done()


def test_the_thread_answers_and_sends_while_the_library_runs_python(dev):
    """With its thread started, the device handles a frame and sends a posted message
    while the library's thread is busy in Python (holding the GIL) for 0.5 s: the
    frame's handling is not late by that time, the ACK and the data are on the wire
    before the library looks, and the data's RTO (0.05 s, no ACK comes) fired meanwhile."""
    assert lib.nic_device_start(dev.c, 0.0) == 0
    dev.data.push(dev.peer.frame(roce.SEND_ONLY, 0, b"ping", ackreq=True))
    done: list[int] = []
    dev.req.post(b"pong", lambda: done.append(1), dev.now())    # wakes the thread (fake rings never do)
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    sent = [roce.parse(f) for f in dev.sent()]
    assert [p.opcode for p in sent].count(roce.ACKNOWLEDGE) == 1
    assert {(p.opcode, p.psn) for p in sent if p.opcode != roce.ACKNOWLEDGE} == {(roce.SEND_ONLY, 0)}
    assert dev.req.stats.retransmits >= 3
    port = dev.completions.read("nic_port", native.ffi.addressof(dev.c.ports, 0))
    assert port.rx_lateness.max * FRAME_TIME < 0.25
    assert select.select([lib.nic_device_notify_fd(dev.c)], [], [], 0)[0]      # the library is told
    assert wait_for(dev, lambda: dev.delivered == [b"ping"])
    dev.data.push(dev.peer.ack(0, 0))
    assert wait_for(dev, lambda: done == [1]) and dev.req.una == 1


def test_the_thread_leaves_an_unknown_qp_to_the_library(dev):
    stranger = roce.FrameTemplate(dev.peer.src, dev.peer.dst, 50001, dev.qpn + 7)
    dev.data.push(stranger.frame(roce.SEND_ONLY, 0, b"?"))
    dev.data.push(dev.peer.frame(roce.SEND_ONLY, 0, b"after"))
    assert lib.nic_device_start(dev.c, 0.0) == 0
    dev.req.post(b"x", None, dev.now())                 # a kick: the thread reads the rings
    port = native.ffi.new("uint32_t *")
    assert select.select([lib.nic_device_notify_fd(dev.c)], [], [], 5.0)[0]
    assert lib.nic_device_need(dev.c, port) == dev.qpn + 7 and port[0] == 0
    time.sleep(0.05)                                    # the thread meanwhile: receives nothing
    assert dev.c.rx_frames == 0
    assert lib.nic_device_skip(dev.c) == 0
    assert wait_for(dev, lambda: dev.delivered == [b"after"]) and dev.c.rx_ignored == 1
