"""DCQCN's fluid model (Zhu et al., SIGCOMM 2015, section 4), per flow as its authors
later wrote it (Zhu et al., "ECN or Delay", CoNEXT 2016, section 3: the same equations
with one RC, RT, alpha per flow), integrated with numpy for the scaled parameters.

Per flow i, with p = p(t - tau*) the marking probability of the queue a feedback delay
ago (RED ramp: 0 up to Kmin, Pmax (q - Kmin)/(Kmax - Kmin) up to Kmax, 1 above) and
r = RC_i(t - tau*) in packets per second:

* a CNP interval tau sees a mark with probability ``1 - (1 - p)^(tau r)``; each is a
  cut ``dRC = -RC alpha / 2`` and ``dRT = -(RT - RC)``;
* ``d alpha/dt = g / tau' ((1 - (1 - p)^(tau' r)) - alpha)``;
* increase events come from the byte counter (``r p / ((1 - p)^-B - 1)`` per second)
  and the timer (``r p / ((1 - p)^(-T r) - 1)``): each moves RC half-way to RT, and
  those past F quiet events also add R_AI to RT;
* ``dq/dt = sum RC - C`` (q >= 0).

A flow joins at its start time at line rate with alpha 1 (section 3.1). The model has
no hyper increase (neither paper's has), rates stay within [min rate, line rate].
Euler steps of ``dt`` with the delayed values read from the stored history.

`fixed_point` is the model's own steady state, solved rather than integrated: CoNEXT
2016, section 3.2, Theorem 1 -- N flows at C/N each, the marking probability p* the
root of ``a^2 alpha* / ((b + d)(c + e)) = tau^2 R_AI R_C*`` (eq. `p_fixed` of the
authors' source, github.com/jitupadhye-zz/rdma conext2016/dcqcn-stability.tex) and the
queue on the RED ramp at p* (eq. `fixedq`). The paper's closed form (eq. `fixedp`, a
Taylor series around p = 0) is not used: at the testbed's scale p* is ~0.1, where it
overestimates p* by half.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tccl.dcqcn import DcqcnParams
from topo.spec import EcnProfile


@dataclass(frozen=True)
class FluidRun:
    """The model's trajectory: time (s), each flow's RC (bit/s, steps x flows), the
    queue (packets)."""

    t: np.ndarray
    rc: np.ndarray
    q: np.ndarray


@dataclass(frozen=True)
class FixedPoint:
    """The fluid model's steady state: marking probability, queue (packets), each
    flow's rate (bit/s)."""

    p: float
    q: float
    rate_bps: float


def marking(q: np.ndarray | float, ecn: EcnProfile) -> np.ndarray:
    """The RED ramp of the switches (packets; `controller.routes.ecn_steps`)."""
    ramp = ecn.pmax * (np.asarray(q, dtype=float) - ecn.kmin) / (ecn.kmax - ecn.kmin)
    return np.where(q <= ecn.kmin, 0.0, np.where(q > ecn.kmax, 1.0, ramp))


def _event_rate(p: float, n: np.ndarray) -> np.ndarray:
    """p / ((1 - p)^-n - 1): increase events per packet sent, every ``n`` packets
    without a mark (1/n at p = 0; 0 for n infinite: no such counter)."""
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if p <= 0:
            return np.where(np.isfinite(n) & (n > 0), 1 / n, 0.0)
        out = p / np.expm1(-n * np.log1p(-p))
    return np.where(np.isfinite(out), out, 0.0)


def integrate(params: DcqcnParams, ecn: EcnProfile, capacity_bps: float, packet_bytes: int,
              starts: Sequence[float], t_end: float, feedback_delay: float, dt: float = 1e-4) -> FluidRun:
    """Flows starting at ``starts`` (s) through one bottleneck of ``capacity_bps``."""
    bits = packet_bytes * 8
    cap, line, floor = capacity_bps / bits, params.line_rate / bits, params.min_rate / bits
    tau, tau_a, timer, f = params.cnp_interval, params.alpha_timer, params.rate_timer, params.fast_recovery_steps
    b = params.byte_counter / packet_bytes
    r_ai = params.rate_ai / bits
    starts_a = np.asarray(starts, dtype=float)
    steps, lag = int(round(t_end / dt)), max(1, int(round(feedback_delay / dt)))
    rc = np.zeros((steps + 1, len(starts_a)))
    q = np.zeros(steps + 1)
    rt = np.zeros(len(starts_a))
    alpha = np.ones(len(starts_a))
    on = np.zeros(len(starts_a), dtype=bool)
    for s in range(steps):
        t = s * dt
        joining = ~on & (starts_a <= t)
        rc[s, joining], rt[joining], alpha[joining] = line, line, 1.0
        on |= joining
        back = max(0, s - lag)
        p = float(min(marking(q[back], ecn), 1 - 1e-12))
        r = rc[back]
        keep = 1 - p
        cnp = 1 - keep ** (tau * r)
        by_bytes = r * _event_rate(p, b)
        by_timer = r * _event_rate(p, timer * r)
        add = r_ai * (r * (keep ** (f * b)) * _event_rate(p, b) + r * keep ** (f * timer * r) * _event_rate(p, timer * r))
        cur = rc[s]
        d_alpha = params.g / tau_a * ((1 - keep ** (tau_a * r)) - alpha)
        d_rt = -(rt - cur) / tau * cnp + add
        d_rc = -cur * alpha / (2 * tau) * cnp + (rt - cur) / 2 * (by_bytes + by_timer)
        alpha = np.where(on, np.clip(alpha + dt * d_alpha, 0, 1), alpha)
        rt = np.where(on, np.minimum(rt + dt * d_rt, line), 0.0)
        rc[s + 1] = np.where(on, np.clip(cur + dt * d_rc, floor, line), 0.0)
        q[s + 1] = max(0.0, q[s] + dt * (rc[s].sum() - cap))
    return FluidRun(np.arange(steps + 1) * dt, rc * bits, q)


def fixed_point(params: DcqcnParams, ecn: EcnProfile, capacity_bps: float, packet_bytes: int,
                flows: int) -> FixedPoint:
    """The steady state of ``flows`` flows through one bottleneck of ``capacity_bps``
    (module docstring): p* by bisection, LHS - RHS being increasing in p (the paper's
    proof of Theorem 1). A p* past Pmax has no point on the ramp: the queue then sits
    at Kmax, where the marking jumps to 1."""
    if flows < 1:
        raise ValueError(f"fixed_point: flows must be >= 1, got {flows}")
    bits = packet_bytes * 8
    rc = capacity_bps / bits / flows
    b_pkts, f = params.byte_counter / packet_bytes, params.fast_recovery_steps
    tau, timer = params.cnp_interval, params.rate_timer

    def excess(p: float) -> float:
        keep = 1 - p
        a = 1 - keep ** (tau * rc)
        b, d = float(_event_rate(p, b_pkts)), float(_event_rate(p, timer * rc))
        c, e = keep ** (f * b_pkts) * b, keep ** (f * timer * rc) * d
        alpha = 1 - keep ** (params.alpha_timer * rc)
        return a * a * alpha / ((b + d) * (c + e)) - tau * tau * (params.rate_ai / bits) * rc

    lo, hi = 1e-12, 1 - 1e-12
    for _ in range(200):            # geometric bisection: p* spans decades
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
    p = (lo * hi) ** 0.5
    q = ecn.kmax if p > ecn.pmax else ecn.kmin + p / ecn.pmax * (ecn.kmax - ecn.kmin)
    return FixedPoint(p, q, capacity_bps / flows)
