"""GOR's settings: one frozen `GorConfig` that the loop, the moves and the REPL's
``set`` share (a change replaces it whole), and the alarm thresholds a fabric's spec
implies."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.alarms import LEVELS, NOTICE, AlarmThresholds
from controller.placement import SAFETY
from topo.addressing import AddressPlan


@dataclass(frozen=True)
class GorConfig:
    """GOR's knobs (the REPL's ``set`` changes them at run time).

    ``top_n``: the elephants of an alarmed port named in the ``detect`` event (the
    placement takes every active flow). ``safety``: the projected utilisation a
    placement keeps every link under where the demands allow (`controller.placement`).
    ``interval_s``: telemetry period; 0.25 s gives alarms within a few hundred ms while
    polling 10 switches costs them little CPU. ``window_s``: how far back samples count
    for elephants (long enough for a few samples of a 10 Mbit/s flow at 1 in 64).
    ``act_level`` and ``act_util``: GOR acts on a link whose alarm is at least
    ``act_level`` *and* whose utilisation reached ``act_util`` in a telemetry round of
    the last ``window_s``. Senders running
    DCQCN keep an overloaded link's marked fraction low (a few percent: they back off
    until the queue hovers near Kmin), so marks alone do not tell an overloaded link
    from a busy one whose software switch forwards in bursts; a link with room left
    under the safety threshold is not where moving a flow helps.
    """

    interval_s: float = 0.25
    window_s: float = 1.0
    act_level: int = NOTICE
    act_util: float = SAFETY
    top_n: int = 2
    safety: float = SAFETY
    verify_s: float = 3.0
    clear_s: float = 6.0
    cooldown_s: float = 10.0
    auto: bool = True
    thresholds: AlarmThresholds = field(default_factory=AlarmThresholds)

    def __post_init__(self) -> None:
        for name in ("interval_s", "window_s", "verify_s", "clear_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"GOR config: {name} must be > 0, got {getattr(self, name)}")
        if not 1 <= self.act_level < len(LEVELS):
            raise ValueError(f"GOR config: act_level must be 1..{len(LEVELS) - 1}, got {self.act_level}")
        if self.top_n < 1:
            raise ValueError(f"GOR config: top_n must be >= 1, got {self.top_n}")
        for name in ("safety", "act_util"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"GOR config: {name} must be in (0, 1], got {getattr(self, name)}")


def default_thresholds(plan: AddressPlan) -> AlarmThresholds:
    """Queue-depth thresholds from the fabric's spec: Kmax, 2 Kmax, 3 Kmax, each at
    most the queue's capacity (a full queue is as deep as it gets)."""
    kmax, cap = plan.spec.ecn.kmax, plan.spec.queue_depth
    depths = sorted(min(n * kmax, cap - 3 + n) for n in (1, 2, 3))
    return AlarmThresholds(queue_depth=(depths[0], depths[1], depths[2]))
