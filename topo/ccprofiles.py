"""Named DCQCN parameter sets a fabric spec chooses: ``dcqcn: testbed|paper|production``
or a mapping ``{profile: NAME, key: value, ...}`` that changes some of a profile's values.

A profile holds real-world numbers at its own reference NIC rate (``line_gbps``): the
reaction point's constants (the agents' `tccl.dcqcn.DcqcnParams`, built by
`tccl.dcqcn.DcqcnParams.from_profile`) and, for the published sets, the switches' ECN
marking (Kmin/Kmax in KB, Pmax). The fabric scales both to its links like every other
real-world figure (`tccl.dcqcn.Scale`): rates x host rate / ``line_gbps``, times x the
spec's ``time_factor``, bytes x both; the marking thresholds become the spec's ``ecn``
profile in packets (`marking_packets`), unless the spec gives ``ecn`` itself.

* ``testbed``: the constants the agents always used (`tccl.dcqcn.DcqcnParams`'
  defaults, at 400 Gbit/s) with the spec's own ``ecn`` section. All fields ``None``.
* ``paper``: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
  SIGCOMM 2015: the algorithm of its section 3 with the 40 Gbit/s values its fluid
  model (section 4) is run with: Kmin 5 KB, Kmax 200 KB, Pmax 1 %, g 1/256, CNP
  interval (tau) 50 us, alpha timer (tau') 55 us, rate timer 55 us, byte counter
  10 MB, F 5, R_AI 40 Mbit/s -- read from the authors' model code
  (github.com/jitupadhye-zz/rdma: fluidmodel/dcqcn/dcqcn2.m, and
  conext2016/dcqcn-model.tex: "F fixed at 5", "R_AI fixed at 40Mbps"). No R_HAI is
  given there: 10 x R_AI, QCN's ratio.
* ``production``: Alibaba's HPCC ns-3 simulator, ``simulation/run.py`` (cc ``dcqcn``,
  github.com/alibaba-edu/High-Precision-Congestion-Control): Kmin/Kmax 100/400 KB and
  Pmax 0.2 per 25 Gbit/s, alpha timer 1 us, rate-decrease interval 4 us (the shortest
  gap between two cuts: here the CNP interval), rate timer 300 us, g 1/256, one
  fast-recovery step, R_AI 5 and R_HAI 50 Mbit/s per 25 Gbit/s, min rate 1 Gbit/s.
  Its Mellanox model has no byte counter and enters hyper increase on the timer alone;
  ours keeps the 10 MB byte counter, as DCQCN's hyper increase needs both counters
  past F (section 3), so the production set climbs additively longer. SimAI's ``SimAI.conf``
  (github.com/aliyun/SimAI, astra-sim-alibabacloud/inputs/config) runs the same model
  with a 900 us rate timer: ``{profile: production, rate_timer_us: 900}``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class DcqcnProfile:
    """One DCQCN parameter set, real-world units at ``line_gbps``; ``None``: the
    agents' default (`tccl.dcqcn.DcqcnParams`) or, for the marking, the spec's ``ecn``."""

    profile: str = "testbed"
    line_gbps: float | None = None          # the NIC rate these values are for
    g: float | None = None                  # alpha's EWMA gain
    cnp_interval_us: float | None = None    # N / tau: at most one CNP per flow this often
    alpha_timer_us: float | None = None     # K / tau': alpha decays after this without CNP
    rate_timer_us: float | None = None      # T: rate-increase timer
    byte_counter_kb: float | None = None    # B: bytes per rate-increase event (0: none)
    fast_recovery_steps: int | None = None  # F
    rate_ai_mbps: float | None = None       # R_AI
    rate_hai_mbps: float | None = None      # R_HAI
    min_rate_mbps: float | None = None      # floor of a cut
    kmin_kb: float | None = None            # ECN marking: none below, ...
    kmax_kb: float | None = None            # ... rising to pmax here, every packet above
    pmax: float | None = None

    @property
    def has_marking(self) -> bool:
        return None not in (self.kmin_kb, self.kmax_kb, self.pmax)


PROFILES: dict[str, DcqcnProfile] = {
    "testbed": DcqcnProfile(),
    "paper": DcqcnProfile(
        profile="paper", line_gbps=40.0, g=1 / 256, cnp_interval_us=50.0, alpha_timer_us=55.0,
        rate_timer_us=55.0, byte_counter_kb=10_000.0, fast_recovery_steps=5, rate_ai_mbps=40.0,
        rate_hai_mbps=400.0, min_rate_mbps=40.0, kmin_kb=5.0, kmax_kb=200.0, pmax=0.01),
    "production": DcqcnProfile(
        profile="production", line_gbps=25.0, g=1 / 256, cnp_interval_us=4.0, alpha_timer_us=1.0,
        rate_timer_us=300.0, fast_recovery_steps=1, rate_ai_mbps=5.0,
        rate_hai_mbps=50.0, min_rate_mbps=1000.0, kmin_kb=100.0, kmax_kb=400.0, pmax=0.2),
}

# The YAML keys of a ``dcqcn`` mapping besides ``profile``: every value field.
VALUE_KEYS = tuple(f.name for f in dataclasses.fields(DcqcnProfile) if f.name != "profile")


def profile_with(name: str, changes: dict[str, float]) -> DcqcnProfile:
    """Profile ``name`` with some values changed (names and keys checked by the caller)."""
    return dataclasses.replace(PROFILES[name], **changes)


def byte_scale(profile: DcqcnProfile, host_mbps: float, time_factor: float) -> float:
    """Real-world bytes at the profile's rate -> emulated bytes: rate x time factors."""
    return host_mbps * 1e6 / ((profile.line_gbps or 400.0) * 1e9) * time_factor


def marking_packets(profile: DcqcnProfile, host_mbps: float, time_factor: float,
                    frame_bytes: int) -> tuple[int, int, float]:
    """The profile's Kmin/Kmax scaled to the fabric, in frames of ``frame_bytes`` (the
    switches count queue depth in packets), and Pmax. Kmax stays above Kmin by one
    packet at least, the least ramp a packet-counting queue has."""
    if not profile.has_marking:
        raise ValueError(f"DCQCN profile {profile.profile!r} has no ECN marking (the spec's ecn holds)")
    scale = byte_scale(profile, host_mbps, time_factor) * 1000 / frame_bytes
    kmin = round(profile.kmin_kb * scale)
    kmax = max(kmin + 1, round(profile.kmax_kb * scale))
    return kmin, kmax, profile.pmax
