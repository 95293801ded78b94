"""DCQCN reaction point against the equations of Zhu et al., SIGCOMM 2015 (section 3)."""

from __future__ import annotations

import dataclasses

import pytest

from nic_fixtures import transport  # noqa: F401
from tccl.dcqcn import DcqcnParams, Scale

# Unscaled real-world parameters with round numbers that make the arithmetic readable.
P = dataclasses.replace(DcqcnParams(), line_rate=100e9, rate_ai=1e9, rate_hai=10e9,
                        min_rate=1e8, byte_counter=1e12)


def test_cnp_cuts_rate_by_half_alpha_and_raises_alpha(transport):
    r = transport.DcqcnRate(P, now=0.0)
    r.on_cnp(0.0)
    # alpha starts at 1: Rc = Rc (1 - 1/2); Rt = old Rc; alpha = (1-g) + g = 1.
    assert r.rc == pytest.approx(50e9) and r.rt == pytest.approx(100e9)
    assert r.alpha == pytest.approx(1.0)
    r.on_cnp(1e-6)
    assert r.rc == pytest.approx(25e9) and r.rt == pytest.approx(50e9)


def test_alpha_decays_once_per_k_without_cnp(transport):
    r = transport.DcqcnRate(P, now=0.0)
    r.on_cnp(0.0)
    r.advance(3.5 * P.alpha_timer)              # three expiries of K
    assert r.alpha == pytest.approx((1 - P.g) ** 3)
    r.on_cnp(3.5 * P.alpha_timer)
    a = (1 - P.g) ** 3
    assert r.alpha == pytest.approx((1 - P.g) * a + P.g)


def test_fast_recovery_runs_f_events_then_additive(transport):
    # Two cuts leave the target below line rate, so an additive step shows in Rt.
    r = transport.DcqcnRate(P, now=0.0)
    r.on_cnp(0.0)
    r.on_cnp(0.0)                               # rc 25G, rt 50G
    f = P.fast_recovery_steps
    for k in range(1, f + 1):                   # F events of fast recovery (paper: F = 5)
        assert r.stage == "fast-recovery"
        r.advance(k * P.rate_timer + 1e-9)
        assert r.rt == pytest.approx(50e9)
        assert r.rc == pytest.approx(50e9 - 25e9 / 2 ** k)
    assert r.timer_count == f and r.stage == "additive"
    r.advance((f + 1) * P.rate_timer + 1e-9)    # the (F+1)th event adds R_AI to Rt first
    assert r.rt == pytest.approx(50e9 + P.rate_ai)
    assert r.rc == pytest.approx((50e9 + P.rate_ai + 50e9 - 25e9 / 2 ** f) / 2)


def test_additive_then_hyper_increase(transport):
    p = dataclasses.replace(P, byte_counter=1000.0)
    r = transport.DcqcnRate(p, now=0.0)
    r.on_cnp(0.0)
    r.on_cnp(0.0)                               # rc 25G, rt 50G
    f = p.fast_recovery_steps
    # Timer alone reaches F: additive stage, Rt grows by R_AI per event.
    r.advance(f * p.rate_timer + 1e-9)
    assert r.stage == "additive"
    rt_before, rc_before = r.rt, r.rc
    r.advance((f + 1) * p.rate_timer + 1e-9)
    assert r.rt == pytest.approx(rt_before + p.rate_ai)
    assert r.rc == pytest.approx((rt_before + p.rate_ai + rc_before) / 2)
    # Bytes push the byte counter past F too: hyper increase by i * R_HAI.
    for _ in range(f + 1):
        r.on_sent(1000, (f + 1) * p.rate_timer + 2e-9)
    assert r.stage == "hyper"
    rt_before = r.rt
    r.on_sent(1000, (f + 1) * p.rate_timer + 3e-9)
    i = min(r.timer_count, r.byte_count) - f
    assert r.rt == pytest.approx(min(p.line_rate, rt_before + i * p.rate_hai))


def test_rate_recovers_to_line_rate_and_never_exceeds_it(transport):
    r = transport.DcqcnRate(P, now=0.0)
    r.on_cnp(0.0)
    r.advance(10_000 * P.rate_timer)
    assert r.rc == pytest.approx(P.line_rate) and r.rc <= P.line_rate


def test_rate_never_below_floor(transport):
    r = transport.DcqcnRate(P, now=0.0)
    for _ in range(100):
        r.on_cnp(0.0)
    assert r.rc == P.min_rate


def test_scale_translates_rates_times_and_bytes():
    s = Scale.for_line_rate(20e6, time_factor=200.0)
    assert s.rate_factor == pytest.approx(5e-5)
    q = DcqcnParams().scaled(s)
    assert q.line_rate == pytest.approx(20e6)
    assert q.cnp_interval == pytest.approx(50e-6 * 200)
    assert q.byte_counter == pytest.approx(10e6 * 5e-5 * 200)
    assert q.rate_ai == pytest.approx(0.01 * 20e6)
    with pytest.raises(ValueError, match="must be > 0"):
        Scale.for_line_rate(0)
