"""Lateness histograms (tccl.fidelity) and when a requester's frame became sendable."""

from __future__ import annotations

import bisect

import pytest

from emulation.fidelity import BOUNDS
from tccl import fidelity, roce
from tccl.dcqcn import DcqcnParams
from tccl.fidelity import Lateness
from tccl.qp import Requester

FRAME = 0.001   # a 1 ms frame time


def upper_edge(frames: float) -> float:
    """The upper edge of the histogram bucket holding ``frames`` (emulation.fidelity)."""
    return BOUNDS[bisect.bisect_left(BOUNDS, frames)]


def test_percentiles_in_frame_times_and_microseconds():
    lat = Lateness(FRAME)
    for _ in range(98):
        lat.add(0.0002)             # 0.2 frame times
    lat.add(0.0031)                 # 3.1
    lat.add(0.040)                  # 40
    s = lat.summary()
    assert s["count"] == 100 and s["early"] == 0
    assert s["p50_frames"] == pytest.approx(upper_edge(0.2))   # within 26 % above
    assert 0.2 <= s["p50_frames"] <= 0.2 * 1.26
    assert s["p99_frames"] == pytest.approx(upper_edge(3.1))
    assert s["max_frames"] == pytest.approx(40) and s["max_us"] == pytest.approx(40_000)
    assert s["p50_us"] == pytest.approx(upper_edge(0.2) * 1000)
    assert s["on_time_frac"] == pytest.approx(0.98)   # within ON_TIME_PACKET_TIMES
    assert not lat.faithful()       # p99 above one frame time
    assert lat.percentile(1.0) == pytest.approx(40)         # never above the maximum


def test_early_events_count_as_on_time():
    lat = Lateness(FRAME)
    lat.add(-0.0005)                # half a frame time early
    lat.add(-0.00001)               # jitter: not early
    lat.add(0.0)
    s = lat.summary()
    assert s["early"] == 1 and s["on_time_frac"] == 1.0 and s["max_us"] == 0.0
    assert lat.faithful()


def test_histograms_merge_and_rebuild_from_their_summary():
    a, b = Lateness(FRAME), Lateness(FRAME)
    for t in (0.0001, 0.0009, 0.002):
        a.add(t)
    for t in (0.5, 0.00001):
        b.add(t)
    rebuilt = Lateness.from_summary(a.summary()).merge(Lateness.from_summary(b.summary()))
    both = Lateness(FRAME).merge(a).merge(b)
    assert rebuilt.histogram.counts == both.histogram.counts and rebuilt.early == both.early
    assert rebuilt.percentile(0.99) == pytest.approx(both.percentile(0.99), rel=1e-3)
    assert both.count == 5 and both.max_s == pytest.approx(0.5)
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(Lateness(2 * FRAME))
    with pytest.raises(ValueError, match="frame time must be > 0"):
        Lateness(0.0)


def test_report_sums_nics_and_applies_the_bound():
    on_time, late = Lateness(FRAME), Lateness(FRAME)
    on_time.add(0.0001)
    for _ in range(10):
        late.add(0.005)
    rep = fidelity.report({"0": (on_time, on_time, 0), "1": (on_time, late, 0)}, FRAME)
    assert rep["tx"]["count"] == 2 and rep["rx"]["count"] == 11
    assert set(rep["nics"]) == {"0", "1"} and not rep["faithful"]
    assert fidelity.report({"0": (on_time, on_time, 3)}, FRAME)["faithful"] is False   # kernel drops
    assert fidelity.report({"0": (on_time, on_time, 0)}, FRAME)["faithful"] is True


def requester(now: float = 0.0, window: int = 3) -> Requester:
    tpl = roce.FrameTemplate(roce.Endpoint("02:00:00:00:00:01", "10.0.0.1"),
                             roce.Endpoint("02:00:00:00:00:02", "10.0.0.2"), 50000, 0x100001)
    return Requester(0x100001, tpl, DcqcnParams(line_rate=8e6), now, mtu=100, window=window, rto=1.0)


def test_a_frame_is_sendable_from_the_event_that_gave_its_qp_work():
    req = requester()
    assert req.sendable_at() is None
    req.post(bytes(400), now=5.0)                   # idle since 0: sendable from the post
    assert req.sendable_at() == 5.0
    req.next_frame(5.0)
    req.next_frame(5.0)                             # the pacer's one frame of credit
    paced = req.sendable_at()
    assert paced > 5.0                              # then its pacer says when
    req.next_frame(paced)                           # window (3) full
    assert req.sendable_at() is None
    req.on_ack(0, False, 7.0)                       # an ACK arriving at 7 opens it
    assert req.sendable_at() == 7.0
    req.next_frame(7.0)
    req.check_timeout(8.0)
    assert req.sendable_at() is None                # full again, no timeout yet
    req.check_timeout(8.5)                          # 1 s after the ACK: it fired at 8
    assert req.stats.timeouts == 1 and req.sendable_at() == 8.0
