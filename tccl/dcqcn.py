"""DCQCN: the RoCEv2 congestion control of the sending NIC (reaction point).

After Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015
(section 3): on each CNP the sender cuts its current rate by alpha/2 and remembers the
old rate as its target; without CNPs alpha decays, and a timer and a byte counter drive
rate increases in three stages (fast recovery towards the target, then additive, then
hyper increase of the target). The notification point (the receiver) sends at most one
CNP per flow per ``cnp_interval``.

Real NICs run this at 100-400 Gbit/s with microsecond timers; the emulated fabric runs
links 4-5 orders of magnitude slower, with millisecond round trips. `Scale` makes that
translation explicit: rates are multiplied by ``rate_factor``, times by
``time_factor``, byte counts by both (bytes = rate x time).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from topo.ccprofiles import DcqcnProfile
from topo.spec import DEFAULT_TIME_FACTOR  # the fabric spec's `time_factor` default

# Real-world reference line rate: the 400 Gbit/s NICs of the Astral fabric.
REAL_LINE_RATE_BPS = 400e9


@dataclass(frozen=True)
class Scale:
    """Real world -> emulation: rates x ``rate_factor``, times x ``time_factor``.

    >>> Scale.for_line_rate(20e6).rate_factor
    5e-05
    """

    rate_factor: float
    time_factor: float = DEFAULT_TIME_FACTOR

    @classmethod
    def for_line_rate(cls, line_rate_bps: float, time_factor: float = DEFAULT_TIME_FACTOR,
                      reference_bps: float = REAL_LINE_RATE_BPS) -> "Scale":
        """The scale of a fabric whose NICs run at ``line_rate_bps`` instead of
        ``reference_bps`` (the rate the real-world constants are for)."""
        if line_rate_bps <= 0 or time_factor <= 0:
            raise ValueError(f"line rate and time factor must be > 0, got {line_rate_bps}, {time_factor}")
        return cls(line_rate_bps / reference_bps, time_factor)

    @property
    def byte_factor(self) -> float:
        return self.rate_factor * self.time_factor


@dataclass(frozen=True)
class DcqcnParams:
    """DCQCN constants, in real-world units unless `scaled` (rates bit/s, times s).

    >>> p = DcqcnParams().scaled(Scale.for_line_rate(20e6))
    >>> round(p.line_rate), round(p.cnp_interval, 6)
    (20000000, 0.01)
    """

    line_rate: float = REAL_LINE_RATE_BPS   # the NIC's line rate; flows start at it
    g: float = 1 / 256                      # alpha EWMA gain (Zhu et al. 2015, section 5)
    cnp_interval: float = 50e-6             # N: min gap between CNPs per flow (paper, section 5)
    alpha_timer: float = 55e-6              # K: alpha decays after K without CNP (paper, section 5)
    rate_timer: float = 55e-6               # T: rate-increase timer period (paper, section 5)
    byte_counter: float = 10e6              # B: bytes sent per rate-increase event (paper: 10 MB)
    fast_recovery_steps: int = 5            # F: events of fast recovery before increasing (paper)
    # R_AI: 1% of line rate per event. The paper uses 40 Mbit/s at 40G (0.1%), which
    # needs ~750 timer periods (8 s emulated) to climb back 75% of the line after a cut
    # -- longer than an emulated experiment; 10x that converges a 2-to-1 incast to
    # fair shares in ~1 s without drops (tests/test_tccl_fabric.py).
    rate_ai: float = 4e9
    rate_hai: float = 40e9                  # R_HAI: 10 x R_AI (ConnectX defaults: 5 and 50 Mbit/s)
    min_rate: float = 400e6                 # floor: 0.1% of line, so a flow never stalls (ours)
    initial_alpha: float = 1.0              # alpha starts at 1 (paper, section 3.1)

    @classmethod
    def from_profile(cls, profile: DcqcnProfile) -> "DcqcnParams":
        """The constants of a spec's DCQCN profile (topo/ccprofiles.py: YAML units,
        ``None`` keeps the default here); a byte counter of 0 (none) never fires."""
        values = {}
        for name, key, unit in _PROFILE_UNITS:
            v = getattr(profile, key)
            if v is not None:
                values[name] = float("inf") if name == "byte_counter" and v == 0 else \
                    (int(v) if unit is None else v * unit)
        return dataclasses.replace(cls(), **values)

    def scaled(self, scale: Scale) -> "DcqcnParams":
        """These constants translated to the emulated fabric."""
        r, t = scale.rate_factor, scale.time_factor
        return dataclasses.replace(
            self, line_rate=self.line_rate * r, cnp_interval=self.cnp_interval * t,
            alpha_timer=self.alpha_timer * t, rate_timer=self.rate_timer * t,
            byte_counter=self.byte_counter * scale.byte_factor, rate_ai=self.rate_ai * r,
            rate_hai=self.rate_hai * r, min_rate=self.min_rate * r)


# DcqcnParams field <- DcqcnProfile key, and the unit of the key (None: a count).
_PROFILE_UNITS = (("line_rate", "line_gbps", 1e9), ("g", "g", 1.0), ("cnp_interval", "cnp_interval_us", 1e-6),
                  ("alpha_timer", "alpha_timer_us", 1e-6), ("rate_timer", "rate_timer_us", 1e-6),
                  ("byte_counter", "byte_counter_kb", 1e3), ("fast_recovery_steps", "fast_recovery_steps", None),
                  ("rate_ai", "rate_ai_mbps", 1e6), ("rate_hai", "rate_hai_mbps", 1e6),
                  ("min_rate", "min_rate_mbps", 1e6))


class DcqcnRate:
    """The reaction point of one flow: current rate ``rc`` (bit/s), target ``rt``, alpha.

    Time is given by the caller (seconds, any monotonic origin), so the state machine
    is deterministic and testable: call `on_cnp` for each CNP, `on_sent` for bytes put
    on the wire, and `advance` before reading the rate.
    """

    def __init__(self, params: DcqcnParams, now: float) -> None:
        self.p = params
        self.rc = params.line_rate
        self.rt = params.line_rate
        self.alpha = params.initial_alpha
        self.timer_count = 0            # T: rate-timer expiries since the last CNP
        self.byte_count = 0             # BC: byte-counter expiries since the last CNP
        self._bytes = 0.0
        self._next_alpha = now + params.alpha_timer
        self._next_timer = now + params.rate_timer
        self.cnps = 0

    def on_cnp(self, now: float) -> None:
        """Equation (1): Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1-g) alpha + g."""
        self.advance(now)
        p = self.p
        self.cnps += 1
        self.rt = self.rc
        self.rc = max(p.min_rate, self.rc * (1 - self.alpha / 2))
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.timer_count = self.byte_count = 0
        self._bytes = 0.0
        self._next_alpha = now + p.alpha_timer
        self._next_timer = now + p.rate_timer

    def on_sent(self, nbytes: int, now: float) -> None:
        """Count bytes towards the byte counter; each B bytes is one increase event."""
        self.advance(now)
        self._bytes += nbytes
        while self._bytes >= self.p.byte_counter:
            self._bytes -= self.p.byte_counter
            self._increase()
            self.byte_count += 1

    def advance(self, now: float) -> None:
        """Apply the alpha decays (equation (2)) and rate-timer events due by ``now``."""
        p = self.p
        if now >= self._next_alpha:
            n = int((now - self._next_alpha) // p.alpha_timer) + 1
            self.alpha *= (1 - p.g) ** n
            self._next_alpha += n * p.alpha_timer
        while now >= self._next_timer:
            self._next_timer += p.rate_timer
            self._increase()
            self.timer_count += 1
            if self.rc >= p.line_rate:   # nothing left to recover: skip idle expiries
                n = int((now - self._next_timer) // p.rate_timer) + 1 if now >= self._next_timer else 0
                self.timer_count += n
                self._next_timer += n * p.rate_timer

    def _increase(self) -> None:
        """One increase event: fast recovery, additive, or hyper increase. The stage
        comes from the counters *before* this event counts itself (callers count after),
        so the first F events after a cut are fast recovery -- the authors' "F = 5
        stages" and HPCC's ns-3 `RateIncEventMlx`, which tests the stage, then counts."""
        p = self.p
        stage = self.stage
        if stage == "hyper":
            self.rt += (min(self.timer_count, self.byte_count) - p.fast_recovery_steps) * p.rate_hai
        elif stage == "additive":
            self.rt += p.rate_ai
        self.rt = min(self.rt, p.line_rate)
        self.rc = min((self.rt + self.rc) / 2, p.line_rate)

    @property
    def stage(self) -> str:
        """Which increase stage the next event would run (for telemetry)."""
        return increase_stage(self.timer_count, self.byte_count, self.p.fast_recovery_steps)


def increase_stage(timer_count: int, byte_count: int, fast_recovery_steps: int) -> str:
    """The increase stage the next event runs, from the timer and byte counters (DCQCN,
    section 3): fast recovery while both are under F, hyper once both are over it,
    additive between. The native NIC's rate (tccl/nic/qp.py) reports through it too."""
    if max(timer_count, byte_count) < fast_recovery_steps:
        return "fast-recovery"
    return "hyper" if min(timer_count, byte_count) > fast_recovery_steps else "additive"
