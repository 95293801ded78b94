"""GOR's settings: one frozen `GorConfig` that the loop, the moves and the REPL's
``set`` share (a change replaces it whole), and the alarm thresholds a fabric's spec
implies."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from typing import Any

from controller.alarms import LEVELS, NOTICE, AlarmThresholds, SwitchAlarms
from controller.placement import SAFETY
from topo.addressing import AddressPlan
from topo.headers import ROCE_DATA_OVERHEAD

# The switches' alarm levels in full-size packet times of an uplink: notice at the first
# mark (a queue past Kmin: DCQCN's senders keep a collided link's queue near Kmin, where
# marks are a few percent of the packets -- measured, two marks within 4 packet times
# came once in three collisions), warning at 4 within 8 (half the packets), critical
# at 8 within 8 (every packet: the queue at Kmax or over).
SWITCH_ALARM_MARKS = (1, 4, 8)
SWITCH_ALARM_WINDOWS = (1, 8, 8)


@dataclass(frozen=True)
class GorConfig:
    """GOR's knobs (the REPL's ``set`` changes them at run time).

    ``top_n``: the elephants of an alarmed port named in the ``detect`` event: what a
    reroute loop moves first (every other movable flow only when the model predicts
    better for it, `controller.gor`). ``safety``: the projected utilisation a
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
    ``act_switch_level``: a link a switch's own alarm raised to this level or above is
    acted on at once, without the utilisation (None: never): the switch's sliding
    window (4 marks within 8 packet times for a warning) is evidence that the queue
    persists, where waiting for a counter round cost the loop up to a round (0.25 s),
    more where the rounds straddle a step's start. Off by default: measured on the
    demo's stock job, a loop at the first warning sees only the flows active that
    early, moves some, and the next loop, with those cooling down, can be left with a
    collision no movable flow undoes (iterations 2..4 at 0.62 against orthogonal's
    0.82 in one run) -- where waiting for the round's utilisation sees the whole job.
    ``plan``: plan a job's QPs as the agents first list them, before any alarm
    (`controller.gor.Gor._plan_listed`); off, only alarms move flows -- what the
    alarm loop's own scenario (`experiments.gor_loop`) measures.
    ``switch_alarms``: the levels the switches raise by themselves, programmed into
    them when GOR connects (None: none, the counter poll alone raises alarms); GOR
    runs a tick as soon as one raises a link's level instead of waiting for the next.
    """

    interval_s: float = 0.25
    window_s: float = 1.0
    act_level: int = NOTICE
    act_util: float = SAFETY
    act_switch_level: int | None = None
    top_n: int = 2
    safety: float = SAFETY
    verify_s: float = 3.0
    clear_s: float = 6.0
    cooldown_s: float = 10.0
    auto: bool = True
    plan: bool = True
    thresholds: AlarmThresholds = field(default_factory=AlarmThresholds)
    switch_alarms: SwitchAlarms | None = None

    def switch_confirms(self, level: int) -> bool:
        """Whether a switch's own alarm at ``level`` is acted on without the
        utilisation (``act_switch_level``)."""
        return self.act_switch_level is not None and level >= self.act_switch_level

    def __post_init__(self) -> None:
        for name in ("interval_s", "window_s", "verify_s", "clear_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"GOR config: {name} must be > 0, got {getattr(self, name)}")
        for name in ("act_level", "act_switch_level"):
            value = getattr(self, name)
            if not (value is None and name == "act_switch_level") and not 1 <= value < len(LEVELS):
                raise ValueError(f"GOR config: {name} must be 1..{len(LEVELS) - 1}, got {value}")
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


def default_switch_alarms(plan: AddressPlan, holdoff_s: float) -> SwitchAlarms:
    """The switches' alarm levels for the fabric's uplinks (`SWITCH_ALARM_MARKS` within
    `SWITCH_ALARM_WINDOWS` packet times of a full RoCE frame), one alarm per port and
    level every ``holdoff_s`` (GOR's interval: a link that keeps marking is re-alarmed
    before its poll could lower it)."""
    spec = plan.spec
    packet_s = (spec.mtu + ROCE_DATA_OVERHEAD) * 8 / (spec.links.uplink_mbps * 1e6)
    windows = tuple(n * packet_s for n in SWITCH_ALARM_WINDOWS)
    return SwitchAlarms(SWITCH_ALARM_MARKS, (windows[0], windows[1], windows[2]), holdoff_s)


def default_config(plan: AddressPlan, **settings: Any) -> GorConfig:
    """GOR's settings for ``plan``'s fabric: ``settings`` over the defaults, with the
    alarm thresholds and the switches' alarm levels its spec implies."""
    config = GorConfig(thresholds=default_thresholds(plan), **settings)
    if "switch_alarms" in settings:
        return config
    return dataclasses.replace(config, switch_alarms=default_switch_alarms(plan, config.interval_s))
