"""Three-level congestion alarms per directed link, with hysteresis.

Each telemetry interval gives every link two numbers: the fraction of its transmitted
packets that were ECN-marked, and the deepest its egress queue got (packets). A level
is *raised* (or escalated) as soon as one interval reaches its thresholds; it is
*lowered* (or cleared) only after ``clear_after`` intervals in a row below
``clear_ratio`` times those thresholds -- so a link near a threshold does not flap, and
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

    @property
    def name(self) -> str:
        """The event's name in GOR's log: alarm_raised, alarm_escalated, ..."""
        return f"alarm_{self.kind}"

    def fields(self) -> dict:
        """The event's fields for GOR's log (names instead of level numbers)."""
        return {"link": "->".join(self.link), "level": LEVELS[self.level], "previous": LEVELS[self.previous],
                "ecn_fraction": round(self.ecn_fraction, 4), "queue_depth": self.queue_depth}


@dataclass
class Alarm:
    """The state of one link's alarm."""

    level: int = OK
    since: float = 0.0
    quiet: int = 0
    last: LinkSample | None = None


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
        return events

    def level(self, link: LinkId) -> int:
        alarm = self.alarms.get(link)
        return alarm.level if alarm else OK

    def active(self, minimum: int = NOTICE) -> dict[LinkId, Alarm]:
        """Links whose alarm is at ``minimum`` or above."""
        return {link: a for link, a in self.alarms.items() if a.level >= minimum}
