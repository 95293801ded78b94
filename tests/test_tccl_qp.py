"""Queue-pair protocol logic over an in-process wire with simulated time and losses."""

from __future__ import annotations


import pytest

from tccl import roce
from tccl.dcqcn import DcqcnParams, Scale
from nic_fixtures import transport  # noqa: F401

A = roce.Endpoint("02:00:00:00:00:0a", "10.0.0.1")
B = roce.Endpoint("02:00:00:00:00:0b", "10.0.0.2")
PARAMS = DcqcnParams().scaled(Scale.for_line_rate(20e6))


def pair(engine, mtu=100, window=8):
    """A requester on A and a responder on B of transport ``engine`` (`run` is the wire
    between them)."""
    got: list[bytes] = []
    req = engine.Requester(0x101, roce.FrameTemplate(A, B, 50000, 0x202), PARAMS, 0.0, mtu=mtu,
                    window=window, rto=0.05,
                    make_template=lambda port: roce.FrameTemplate(A, B, port, 0x202))
    resp = engine.Responder(0x202, roce.FrameTemplate(B, A, 50001, 0x101, ecn=roce.ECN_NOT_ECT),
                     roce.FrameTemplate(B, A, 50001, 0x101, dscp=roce.CNP_DSCP,
                                        ecn=roce.ECN_NOT_ECT),
                     PARAMS.cnp_interval, got.append)
    return req, resp, got


def run(req, resp, drop=lambda i, f: False, ce=lambda i: False, until=None, limit=5.0):
    """Step simulated time in 0.1 ms steps, dropping the i-th data frame when
    ``drop(i, frame)`` and marking it CE when ``ce(i)``; feedback is never lost.
    Returns (time, data frames sent, [(time, feedback frame)])."""
    now, sent, back = 0.0, 0, []
    while now < limit:
        frame = req.next_frame(now)
        if frame is not None:
            i = sent
            sent += 1
            if not drop(i, frame):
                if ce(i):
                    frame = bytearray(frame)
                    frame[roce.IP_OFF + 1] |= roce.ECN_CE
                    frame = bytes(frame)
                for fb in resp.on_frame(roce.parse(frame), frame, now):
                    back.append((now, fb))
                    p = roce.parse(fb)
                    if p.opcode == roce.CNP:
                        req.on_cnp(now)
                    else:
                        req.on_ack(p.psn, p.syndrome == roce.AETH_NAK_SEQ, now)
        req.check_timeout(now)
        if until() if until else req.idle:
            break
        now += 1e-4
    return now, sent, back


def test_messages_arrive_complete_and_in_order(transport):
    req, resp, got = pair(transport)
    msgs = [bytes([i]) * n for i, n in enumerate((1, 100, 101, 1000, 57))]
    for m in msgs:
        req.post(m)
    run(req, resp)
    assert got == msgs
    assert req.idle and req.stats.retransmits == 0


@pytest.mark.parametrize("drops", [{0}, {3}, {3, 4, 5}, {9}, set(range(2, 40, 7))])
def test_go_back_n_recovers_from_losses(transport, drops):
    req, resp, got = pair(transport)
    data = bytes(range(256)) * 10
    req.post(data)
    req.post(b"second")
    _, sent, _ = run(req, resp, drop=lambda i, f: i in drops)
    assert got == [data, b"second"]
    assert req.stats.retransmits > 0 and resp.stats.out_of_order + req.stats.timeouts > 0
    assert sent == req.stats.packets


def test_lost_acks_recovered_by_timeout(transport):
    req, resp, got = pair(transport)
    req.post(b"x" * 250)            # 3 packets, the last asks for an ACK
    lost = {"n": 0}

    def drop_first_delivery_of_last(i, frame):
        if roce.parse(frame).opcode == roce.SEND_LAST and lost["n"] == 0:
            lost["n"] = 1
            return True
        return False

    run(req, resp, drop=drop_first_delivery_of_last)
    assert got == [b"x" * 250] and req.stats.timeouts == 1


def test_ce_marks_give_at_most_one_cnp_per_interval_and_cut_rate(transport):
    req, resp, got = pair(transport, mtu=1000, window=64)
    req.post(bytes(100_000))
    marked = 40
    now, sent, back = run(req, resp, ce=lambda i: i < marked, limit=60.0)
    cnps = [t for t, f in back if roce.parse(f).opcode == roce.CNP]
    assert got == [bytes(100_000)]
    assert all(b - a >= PARAMS.cnp_interval for a, b in zip(cnps, cnps[1:]))
    assert resp.stats.min_cnp_gap == pytest.approx(min(b - a for a, b in zip(cnps, cnps[1:])))
    assert resp.stats.ce_marked == marked
    # One CNP per interval of marked traffic (time steps of 0.1 ms, so +1 for edges).
    assert 2 <= len(cnps) < marked
    assert req.stats.cnps == len(cnps)
    assert req.rate.cnps == len(cnps) and req.rate.alpha > 0


def test_port_change_waits_for_boundary_and_drains(transport):
    req, resp, got = pair(transport)
    req.post(b"a" * 500)
    req.post(b"b" * 500)
    # Send two packets of the first message, then ask for a new port.
    req.next_frame(0.0)
    req.next_frame(1.0)
    change = req.request_port(60000)
    assert not change.done.is_set() and req.sport == 50000
    run(req, resp)
    assert change.done.is_set() and req.sport == 60000 and change.old_port == 50000
    assert got == [b"a" * 500, b"b" * 500]
    assert resp.last_sport == 60000


def test_port_change_of_idle_flow_applies_at_once(transport):
    req, resp, got = pair(transport)
    change = req.request_port(61000)
    assert change.done.is_set() and req.sport == 61000
    req.post(b"q" * 150)
    run(req, resp)
    assert got == [b"q" * 150] and resp.last_sport == 61000


def test_port_change_applies_when_the_last_message_is_acknowledged(transport):
    req, resp, got = pair(transport)
    req.post(b"w" * 250)
    for t in range(3):
        req.next_frame(float(t))          # all three packets out, none acknowledged yet
    change = req.request_port(62000)
    assert not change.done.is_set()
    run(req, resp)                        # the go-back-N resend gets them ACKed
    assert change.done.is_set() and req.sport == 62000 and got == [b"w" * 250]


def test_bad_port_and_empty_message_rejected(transport):
    req, _, _ = pair(transport)
    with pytest.raises(ValueError, match="1024..65535"):
        req.request_port(80)
    with pytest.raises(ValueError, match="at least one byte"):
        req.post(b"")


def test_pacing_follows_rate(transport):
    req, resp, _ = pair(transport, mtu=1000, window=1000)
    req.post(bytes(100_000))
    now, sent, _ = run(req, resp)
    wire = req.stats.bytes * 8
    # Finishes no faster than line rate allows (20 Mbit/s) and not much slower.
    assert wire / PARAMS.line_rate <= now + 1e-3 <= 1.2 * wire / PARAMS.line_rate + 2e-3


def test_icrc_corruption_is_dropped_and_recovered(transport):
    req, resp, got = pair(transport)
    req.post(b"z" * 300)
    corrupt = {"done": False}
    # Corrupt the second packet once, on its way into the responder.
    orig = resp.on_frame

    def on_frame(p, frame, now):
        if p.psn == 1 and not corrupt["done"]:
            corrupt["done"] = True
            frame = frame[:-5] + bytes([frame[-5] ^ 0xFF]) + frame[-4:]
        return orig(p, frame, now)

    resp.on_frame = on_frame
    run(req, resp)
    assert got == [b"z" * 300] and resp.stats.bad_icrc == 1
