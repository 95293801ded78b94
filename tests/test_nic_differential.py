"""The native NIC against the Python transport (the reference): the same deterministic
lossy wire, the same CNP sequence -> the same frames in the same order, bit for bit
(ICRC included), the same go-back-N trace and the same DCQCN rate trajectory."""

from __future__ import annotations

import dataclasses
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nic_fixtures import transport_engine
from tccl import roce
from tccl.dcqcn import DcqcnParams, Scale
from tccl.nic import qp as native

A = roce.Endpoint("02:00:00:00:00:0a", "10.0.0.1")
B = roce.Endpoint("02:00:00:00:00:0b", "10.0.0.2")
PARAMS = DcqcnParams().scaled(Scale.for_line_rate(20e6))


def wire_trace(engine_name: str, seed: int, loss: float, ce: float, mtu: int = 700, window: int = 16,
               port_change_at: int | None = None) -> list:
    """Everything observable of one run over a lossy, CE-marking wire whose decisions
    come from ``seed``: each frame sent either way (time, bytes), each rate change,
    each message delivered, the final statistics."""
    e = transport_engine(engine_name)
    rng = random.Random(seed)
    got: list[bytes] = []
    make = lambda port: roce.FrameTemplate(A, B, port, 0x202)  # noqa: E731
    req = e.Requester(0x101, make(50000), PARAMS, 0.0, mtu=mtu, window=window, rto=0.02, make_template=make)
    resp = e.Responder(0x202, roce.FrameTemplate(B, A, 50001, 0x101, ecn=roce.ECN_NOT_ECT),
                       roce.FrameTemplate(B, A, 50001, 0x101, dscp=roce.CNP_DSCP, ecn=roce.ECN_NOT_ECT),
                       PARAMS.cnp_interval, got.append)
    msgs = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5000))) for _ in range(12)]
    done: list[int] = []
    for i, m in enumerate(msgs):
        req.post(m, lambda i=i: done.append(i), 0.0)
    trace: list = []
    now, step = 0.0, 1e-4
    while now < 20.0 and not (req.idle and len(got) == len(msgs)):
        if port_change_at is not None and len(trace) == port_change_at:
            req.request_port(60000)
        frame = req.next_frame(now)
        if frame is not None:
            trace.append(("data", round(now, 9), frame, req.rate.rc))
            if rng.random() >= loss:
                if rng.random() < ce:
                    frame = bytearray(frame)
                    frame[roce.IP_OFF + 1] |= roce.ECN_CE
                    frame = bytes(frame)
                for fb in resp.on_frame(roce.parse(frame), frame, now):
                    trace.append(("back", round(now, 9), fb))
                    if rng.random() < loss / 2:
                        continue                   # feedback is lost too, sometimes
                    p = roce.parse(fb)
                    if p.opcode == roce.CNP:
                        req.on_cnp(now)
                    else:
                        req.on_ack(p.psn, p.syndrome & 0xE0 == roce.AETH_NAK_SEQ, now)
                    trace.append(("rate", req.rate.rc, req.rate.rt, req.rate.alpha))
        trace.append(("timeout", req.check_timeout(now), req.ready_at(), req.sendable_at()))
        now += step
    assert got == msgs and done == list(range(len(msgs)))
    return trace + [("stats", dataclasses.asdict(req.stats), dataclasses.asdict(resp.stats),
                     req.sport, resp.last_sport)]


@pytest.mark.parametrize("seed,loss,ce", [(1, 0.0, 0.0), (2, 0.05, 0.0), (3, 0.0, 0.3), (4, 0.1, 0.2),
                                          (5, 0.2, 0.5)])
def test_same_wire_same_frames_rates_and_recovery(seed, loss, ce):
    python = wire_trace("python", seed, loss, ce)
    assert wire_trace("native", seed, loss, ce) == python
    kinds = {t[0] for t in python}
    assert "data" in kinds and "back" in kinds
    stats = python[-1][1]
    if loss:
        assert stats["retransmits"] > 0            # go-back-N ran, identically
    if ce:
        assert stats["cnps"] > 0


def test_same_port_change_on_both():
    python = wire_trace("python", 7, 0.05, 0.1, port_change_at=40)
    assert wire_trace("native", 7, 0.05, 0.1, port_change_at=40) == python
    assert python[-1][3] == 60000 == python[-1][4]


@settings(max_examples=200, deadline=None)
@given(opcode=st.sampled_from([roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_ONLY]),
       psn=st.integers(0, roce.PSN_MASK), ackreq=st.booleans(), payload=st.binary(max_size=3000),
       sport=st.integers(1024, 65535), dscp=st.integers(0, 63), ecn=st.integers(0, 3))
def test_frames_and_icrc_bit_identical(opcode, psn, ackreq, payload, sport, dscp, ecn):
    t = roce.FrameTemplate(A, B, sport, 0xABCDE, dscp=dscp, ecn=ecn)
    c = native.ffi.new("nic_template *")
    c.hdr = native.header(t)
    out = native.ffi.new("uint8_t[]", 4096)
    n = native.lib.nic_frame(c, opcode, psn, native.lib.NIC_F_ACKREQ if ackreq else 0, native.ffi.NULL, 0,
                             payload, len(payload), out, 4096)
    frame = t.frame(opcode, psn, payload, ackreq)
    assert native.ffi.unpack(native.ffi.cast("char *", out), n) == frame
    assert native.lib.nic_icrc(frame, len(frame)) == roce.icrc(frame)
    n = native.lib.nic_ack(c, psn, psn ^ 0x5555, ackreq, out, 4096)
    assert native.ffi.unpack(native.ffi.cast("char *", out), n) == t.ack(psn, psn ^ 0x5555, nak=ackreq)
    n = native.lib.nic_cnp(c, out, 4096)
    assert native.ffi.unpack(native.ffi.cast("char *", out), n) == t.cnp()


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=9100), crc=st.integers(0, 2**32 - 1), offset=st.integers(0, 15))
def test_crc32_folded_and_by_tables_is_zlibs(data, crc, offset):
    """The ICRC's CRC-32: carry-less folding of whole blocks (at any alignment) and the
    tables alone, from any running CRC, give zlib's."""
    buf = native.ffi.from_buffer(bytes(offset) + data) + offset
    assert native.lib.nic_crc32(crc, buf, len(data)) == zlib.crc32(data, crc)
    assert native.lib.nic_crc32_tables(crc, buf, len(data)) == zlib.crc32(data, crc)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=0, max_size=200), cut=st.integers(0, 200))
def test_parse_agrees_on_any_bytes(data, cut):
    """Random bytes, and real frames cut short or with garbage after a real header."""
    t = roce.FrameTemplate(A, B, 50000, 0x202)
    for frame in (data, t.frame(roce.SEND_ONLY, 5, data)[:cut], t.ack(3, 4)[:cut] + data,
                  t.frame(roce.WRITE_ONLY, 1, data)):
        p = native.ffi.new("nic_parsed *")
        ok = native.lib.nic_parse(frame, len(frame), p)
        ref = roce.parse(frame)
        assert bool(ok) == (ref is not None)
        if ref is not None:
            assert (p.ecn, p.sport, p.opcode, p.dqpn, bool(p.ackreq), p.psn, p.payload_off, p.payload_end,
                    p.syndrome, p.msn) == (ref.ecn, ref.sport, ref.opcode, ref.dqpn, ref.ackreq, ref.psn,
                                           ref.payload_off, ref.payload_end, ref.syndrome, ref.msn)
        assert bool(native.lib.nic_icrc_ok(frame, len(frame))) == roce.icrc_ok(frame)


def test_same_rate_trajectory_for_one_cnp_sequence():
    """A CNP sequence with idle gaps and bytes sent between: every step's state equal."""
    rng = random.Random(11)
    python, c = transport_engine("python").DcqcnRate(PARAMS, 0.0), native.DcqcnRate(PARAMS, 0.0)
    now = 0.0
    for _ in range(5000):
        now += rng.choice([1e-5, 1e-4, PARAMS.rate_timer, 3.7 * PARAMS.alpha_timer, 0.05])
        action, nbytes = rng.random(), rng.randrange(60, 5000)
        for r in (python, c):
            if action < 0.1:
                r.on_cnp(now)
            elif action < 0.8:
                r.on_sent(nbytes, now)
            else:
                r.advance(now)
        state = [(r.rc, r.rt, r.alpha, r.timer_count, r.byte_count, r.cnps, r.stage) for r in (python, c)]
        assert state[0] == state[1], now
