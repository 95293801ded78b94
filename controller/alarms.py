"""Three-level congestion alarms per directed link, with hysteresis.

Two sources raise them. The switches, at once: astral.p4 keeps the times of each
egress port's last marks and, when a level's number of marks (`SwitchAlarms`) falls
within its window, sends the controller a PacketIn naming the level (`parse_alarm`;
one per port and level per hold-off, however many marks). And the counter poll, each
telemetry interval, from two numbers per link: the fraction of its transmitted packets
that were ECN-marked, and the deepest its egress queue got (packets). A level is
*raised* (or escalated) as soon as either reaches it; it is *lowered* (or cleared) only
after ``clear_after`` intervals in a row below ``clear_ratio`` times the poll's
thresholds -- so a link near a threshold does not flap, and
a flow that was just moved is not judged by one quiet interval. Every change is an
`AlarmEvent` with its timestamp.

    >>> book = AlarmBook(AlarmThresholds())
    >>> [e.kind for e in book.update(1.0, {("b0l0", "sp0"): LinkSample(0.3, 25, 400)})]
    ['raised']
"""

from __future__ import annotations

from dataclasses import dataclass, field

LEVELS = ("ok", "notice", "warning", "critical")
OK, NOTICE, WARNING, CRITICAL = range(4)

LinkId = tuple[str, str]


@dataclass(frozen=True)
class AlarmThresholds:
    """Raise thresholds for notice, warning, critical.

    The marked fraction is the main signal: a link whose queue sits on DCQCN's ramp
    (Kmin..Kmax) marks a few percent of its packets, an overloaded one a quarter and
    more; 2 %, 8 %, 25 % separate the stages with a margin over the marks that the
    bursts of a busy but not overloaded link cause (measured: up to ~2 % on the
    emulated fabric, whose software switches forward in bursts when the CPU is
    shared). The queue depth is the interval's *maximum*, so it takes a depth a burst
    alone does not reach: Kmax (every ECT packet marked), twice and three times that
    (defaults for the fabric's Kmax of 20 packets; `controller.config.default_thresholds`
    derives them from the spec). ``min_packets``: below this many packets an
    interval's marked fraction is noise and only the queue depth counts.
    """

    ecn_fraction: tuple[float, float, float] = (0.02, 0.08, 0.25)
    queue_depth: tuple[int, int, int] = (20, 40, 60)
    clear_ratio: float = 0.5
    clear_after: int = 3
    min_packets: int = 20

    def __post_init__(self) -> None:
        for name in ("ecn_fraction", "queue_depth"):
            values = getattr(self, name)
            if len(values) != 3 or list(values) != sorted(values) or values[0] <= 0:
                raise ValueError(f"alarm thresholds: {name} must be three rising positive values "
                                 f"(notice, warning, critical), got {values}")
        if not 0 < self.clear_ratio <= 1:
            raise ValueError(f"alarm thresholds: clear_ratio must be in (0, 1], got {self.clear_ratio}")
        if self.clear_after < 1:
            raise ValueError(f"alarm thresholds: clear_after must be >= 1, got {self.clear_after}")

    def level(self, sample: "LinkSample", scale: float = 1.0) -> int:
        """The highest level whose thresholds (times ``scale``) the sample reaches."""
        level = OK
        for lvl in (NOTICE, WARNING, CRITICAL):
            by_marks = (sample.packets >= self.min_packets
                        and sample.ecn_fraction >= self.ecn_fraction[lvl - 1] * scale)
            by_queue = sample.queue_depth >= self.queue_depth[lvl - 1] * scale
            if by_marks or by_queue:
                level = lvl
        return level


# A link's alarm with no evidence (a switch's alarm PacketIn, a poll's interval at a
# level's threshold) for longer than this (emulated s) was quiet: the next evidence
# starts a new episode (`Alarm.episode`), which dates the loop it causes. Two of GOR's
# intervals: a switch sends at most one alarm per port and level per hold-off (one
# interval) and a poll comes every interval, so a persisting queue is never this quiet.
EPISODE_QUIET_S = 0.5

# astral.p4's ALARM_RING: a switch remembers the times of a port's last 64 marks, so a
# level's threshold is at most that many.
ALARM_RING = 64


@dataclass(frozen=True)
class SwitchAlarms:
    """The levels the switches raise by themselves: level L when ``marks[L-1]`` of an
    egress port's packets were ECN-marked within ``windows_s[L-1]`` (emulated seconds,
    a sliding window: the switch compares the time of the mark that makes the count
    with the time of the earliest of them), and at most one alarm per port and level
    every ``holdoff_s``. `controller.config.default_switch_alarms` derives them from
    the fabric's spec; GOR programs them into every switch (astral.p4's alarm_config).
    """

    marks: tuple[int, int, int]
    windows_s: tuple[float, float, float]
    holdoff_s: float

    def __post_init__(self) -> None:
        if len(self.marks) != 3 or list(self.marks) != sorted(self.marks) or \
                not 1 <= self.marks[0] <= self.marks[2] <= ALARM_RING:
            raise ValueError(f"switch alarms: marks must be three rising counts in 1..{ALARM_RING} "
                             f"(notice, warning, critical), got {self.marks}")
        if len(self.windows_s) != 3 or not all(0 < w < 4000 for w in self.windows_s):
            raise ValueError(f"switch alarms: windows_s must be three windows in (0, 4000) s, got {self.windows_s}")
        if not 0 < self.holdoff_s < 4000:
            raise ValueError(f"switch alarms: holdoff_s must be in (0, 4000) s, got {self.holdoff_s}")

    def action_params(self) -> dict[str, int]:
        """astral.p4's set_alarm_config arguments (microseconds of the switch's clock)."""
        us = [round(w * 1e6) for w in self.windows_s]
        return {"notice_marks": self.marks[0], "notice_window_us": us[0],
                "warning_marks": self.marks[1], "warning_window_us": us[1],
                "critical_marks": self.marks[2], "critical_window_us": us[2],
                "holdoff_us": round(self.holdoff_s * 1e6)}


@dataclass(frozen=True)
class SwitchAlarm:
    """One alarm a switch sent: the port whose marks reached ``level``, how many marks
    that level counts, when the first of them was made (the switch's emulated
    seconds) and when the alarm reached the controller."""

    switch: str
    port: int
    level: int
    marks: int
    first_mark: float
    received: float

    @property
    def latency_s(self) -> float:
        """First of the marks -> the alarm at the controller (emulated seconds)."""
        return self.received - self.first_mark


def parse_alarm(received: float, switch: str, metadata: dict) -> SwitchAlarm | None:
    """The alarm a PacketIn carries (its ``alarm_level`` 1..3), or None (a sample only,
    or a level out of range: whatever a switch sends is GOR's input)."""
    level = int(metadata.get("alarm_level", 0))
    if not NOTICE <= level <= CRITICAL:
        return None
    return SwitchAlarm(switch, int(metadata.get("egress_port", 0)), level, int(metadata.get("alarm_marks", 0)),
                       int(metadata.get("first_mark", 0)) / 1e6, received)


@dataclass(frozen=True)
class LinkSample:
    """One interval of one link: marked fraction, max queue depth, packets sent."""

    ecn_fraction: float
    queue_depth: int
    packets: int


@dataclass(frozen=True)
class AlarmEvent:
    """A level change of one link: raised, escalated, lowered or cleared."""

    time: float
    link: LinkId
    kind: str
    level: int
    previous: int
    ecn_fraction: float
    queue_depth: int
    switch_alarm: SwitchAlarm | None = None    # what raised it, when a switch did

    @property
    def name(self) -> str:
        """The event's name in GOR's log: alarm_raised, alarm_escalated, ..."""
        return f"alarm_{self.kind}"

    def fields(self) -> dict:
        """The event's fields for GOR's log (names instead of level numbers); a switch's
        alarm adds its marks, the first mark's time and that mark -> GOR in ms."""
        out = {"link": "->".join(self.link), "level": LEVELS[self.level], "previous": LEVELS[self.previous],
               "ecn_fraction": round(self.ecn_fraction, 4), "queue_depth": self.queue_depth,
               "source": "poll" if self.switch_alarm is None else "switch"}
        if self.switch_alarm is not None:
            a = self.switch_alarm
            out.update(marks=a.marks, first_mark_t=round(a.first_mark, 6), alarm_ms=round(a.latency_s * 1e3, 3))
        return out


@dataclass
class Alarm:
    """The state of one link's alarm."""

    level: int = OK
    since: float = 0.0
    quiet: int = 0
    last: LinkSample | None = None
    # The highest level a switch's own alarm (its sliding window of marks) raised this
    # alarm to, capped by the level in force: evidence of a persistent queue that no
    # counter round has to confirm (`controller.gor` acts on it at once).
    switch_level: int = OK
    # When the congestion that keeps the alarm up now began: the raise, or the first
    # evidence after `EPISODE_QUIET_S` without any. Why not ``since``: an alarm is
    # lowered only after ``clear_after`` quiet intervals, so a link that marks again
    # within them keeps the alarm of an earlier collision, and a loop dated from that
    # measured the quiet time in between, not GOR.
    episode: float = 0.0
    evidence: float = float("-inf")     # the last evidence's time

    def note(self, now: float) -> None:
        """Evidence of congestion at ``now``: a new episode after a quiet spell."""
        if now - self.evidence > EPISODE_QUIET_S:
            self.episode = now
        self.evidence = max(self.evidence, now)


@dataclass
class AlarmBook:
    """Alarm state of every link; `update` feeds one telemetry interval."""

    thresholds: AlarmThresholds
    alarms: dict[LinkId, Alarm] = field(default_factory=dict)

    def update(self, now: float, samples: dict[LinkId, LinkSample]) -> list[AlarmEvent]:
        """Apply one interval's samples; returns the level changes it caused."""
        events = []
        t = self.thresholds
        for link, sample in samples.items():
            alarm = self.alarms.setdefault(link, Alarm())
            alarm.last = sample
            high = t.level(sample)
            low = t.level(sample, t.clear_ratio)
            if high > OK:
                alarm.note(now)
            new = alarm.level
            if high > alarm.level:
                new, alarm.quiet = high, 0
            elif low < alarm.level:
                alarm.quiet += 1
                if alarm.quiet >= t.clear_after:
                    new, alarm.quiet = low, 0
            else:
                alarm.quiet = 0
            if new != alarm.level:
                kind = ("raised" if alarm.level == OK else "escalated") if new > alarm.level else \
                       ("cleared" if new == OK else "lowered")
                events.append(AlarmEvent(now, link, kind, new, alarm.level,
                                         sample.ecn_fraction, sample.queue_depth))
                alarm.level, alarm.since = new, now
                alarm.switch_level = min(alarm.switch_level, new)
        return events

    def raise_from_switch(self, link: LinkId, alarm: SwitchAlarm) -> AlarmEvent | None:
        """Take in a switch's alarm of ``link`` at its arrival: raise or escalate to its
        level (None when that is no higher than the level in force). Lowering stays
        the poll's: a notice comes with a single mark, and a link that marks now and
        then would never clear if each such mark restarted the quiet count. Either
        way the alarm remembers the switch's level (`Alarm.switch_level`)."""
        state = self.alarms.setdefault(link, Alarm())
        state.note(alarm.received)
        if alarm.level <= state.level:
            state.switch_level = max(state.switch_level, alarm.level)
            return None
        last = state.last or LinkSample(0.0, 0, 0)
        event = AlarmEvent(alarm.received, link, "raised" if state.level == OK else "escalated", alarm.level,
                           state.level, last.ecn_fraction, last.queue_depth, alarm)
        state.level, state.since = alarm.level, alarm.received
        state.switch_level = alarm.level
        return event

    def level(self, link: LinkId) -> int:
        alarm = self.alarms.get(link)
        return alarm.level if alarm else OK

    def switch_level(self, link: LinkId) -> int:
        """The level a switch's own alarm confirmed for ``link`` (`Alarm.switch_level`)."""
        alarm = self.alarms.get(link)
        return alarm.switch_level if alarm else OK

    def active(self, minimum: int = NOTICE) -> dict[LinkId, Alarm]:
        """Links whose alarm is at ``minimum`` or above."""
        return {link: a for link, a in self.alarms.items() if a.level >= minimum}
