"""Priority flow control (IEEE 802.1Qbb) in the traffic manager: what a commodity
switch keeps per port and priority to make a priority lossless.

Ingress side (the port the packets came in by): the bytes of the packets that arrived
there on a lossless priority and still sit in some egress queue. Above ``xoff`` the
switch sends a PFC PAUSE for that priority out of the ingress port (asking for the
longest pause and repeating it every half of it while above XON, as switches refresh
XOFF); at or below ``xon`` it sends a resume (pause time 0). Between ``xoff`` and
``xoff + headroom`` it still admits what the sender had in flight when the PAUSE left
(docs/fabric.md: how headroom is sized); beyond that the packet is dropped and counted
(``headroom_drops``, which a well-sized headroom keeps at 0). A lossless queue has no
egress tail drop: the ingress accounting bounds it, as the buffer's lossless pools do.

Egress side (the port a PAUSE came in by): the queue of that priority is not served
until the pause runs out (quanta x 512 bit times at the port's rate, emulated time) or
a resume arrives; the paused time is summed per priority.

Watchdog (a pause storm: a peer that never stops pausing, a PFC deadlock): a lossless
queue with packets waiting that has been paused without a break for ``watchdog_us``
loses its lossless status: its packets are discarded, new ones for it too, PAUSE for it
is ignored, and a warning is logged and counted (``storms``) for GOR. It is lossless
again once no PAUSE has come for it for ``watchdog_us`` (SONiC's PFC watchdog with its
"drop" action, detection and restoration times alike).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4sim.switch.pause import PRIORITIES

# Thresholds in bytes, sized for 4218-byte frames (RoCE path MTU 4096) on the fabric's
# 10 Mbit/s links (docs/fabric.md, "PFC"): XOFF at ~8 frames per ingress port and
# priority, XON at ~4, and a headroom of 2 x (cable + MTU + response) with the response
# of a Python switch and NIC counted as two frame times: 2 x (0 + 1 + 2) frames.
DEFAULT_XOFF = 32768
DEFAULT_XON = 16384
DEFAULT_HEADROOM = 25600


@dataclass(frozen=True)
class PfcConfig:
    """Lossless priorities and their thresholds, in bytes per (ingress port, priority).

    >>> PfcConfig(frozenset({3}), xoff=32768, xon=16384, headroom=25600).watchdog_us
    0.0
    """

    priorities: frozenset[int]
    xoff: int
    xon: int
    headroom: int
    watchdog_us: float = 0.0   # 0: no watchdog

    def __post_init__(self) -> None:
        bad = sorted(p for p in self.priorities if not 0 <= p < PRIORITIES)
        if not self.priorities or bad:
            raise ValueError(f"PFC priorities must be 0..{PRIORITIES - 1}, got {sorted(self.priorities)}")
        if self.xoff < 1:
            raise ValueError(f"PFC xoff must be >= 1 byte, got {self.xoff}")
        if not 0 <= self.xon < self.xoff:
            raise ValueError(f"PFC xon must be 0 <= xon < xoff ({self.xoff}), got {self.xon}")
        if self.headroom < 0:
            raise ValueError(f"PFC headroom must be >= 0 bytes, got {self.headroom}")
        if self.watchdog_us < 0:
            raise ValueError(f"PFC watchdog must be >= 0 (0: off), got {self.watchdog_us}")


def _zeros() -> list:
    return [0] * PRIORITIES


@dataclass(slots=True)
class PortPfc:
    """PFC state and counters of one port, per priority (lists indexed by priority)."""

    # ingress side: what this port's peer sent that is still queued, and our XOFF
    ingress_bytes: list[int] = field(default_factory=_zeros)
    xoff: list[bool] = field(default_factory=lambda: [False] * PRIORITIES)
    refresh_at: list[float] = field(default_factory=_zeros)
    pause_tx: list[int] = field(default_factory=_zeros)
    headroom_drops: int = 0
    # egress side: PAUSE from the peer
    pause_rx: list[int] = field(default_factory=_zeros)
    paused_until: list[float] = field(default_factory=_zeros)   # us
    paused_since: list[float] = field(default_factory=_zeros)   # us, start of the current pause
    booked_us: list[float] = field(default_factory=_zeros)      # paused time, to paused_until
    last_pause_rx: list[float] = field(default_factory=_zeros)
    # watchdog
    storm: list[bool] = field(default_factory=lambda: [False] * PRIORITIES)
    storms: int = 0
    storm_drops: int = 0

    def paused(self, priority: int, now: float) -> bool:
        return self.paused_until[priority] > now

    def pause(self, priority: int, now: float, until: float) -> None:
        """A PAUSE (``until`` > now) or a resume (``until`` = now) arrived at ``now``."""
        prev = self.paused_until[priority]
        if prev > now:
            self.booked_us[priority] -= prev - now   # the part of the old pause not lived
        else:
            self.paused_since[priority] = now
        self.booked_us[priority] += max(0.0, until - now)
        self.paused_until[priority] = until

    def to_json(self, now: float) -> dict[str, Any]:
        """Counters for the queue stats: pause frames sent and received and paused
        seconds (emulated) per priority, XOFF and storm states, drops."""
        paused_s = [round((b - max(0.0, u - now)) / 1e6, 6) for b, u in zip(self.booked_us, self.paused_until)]
        return {"pause_tx": list(self.pause_tx), "pause_rx": list(self.pause_rx), "paused_s": paused_s,
                "xoff": list(self.xoff), "storm": list(self.storm), "storms": self.storms,
                "storm_drops": self.storm_drops, "headroom_drops": self.headroom_drops,
                "ingress_bytes": list(self.ingress_bytes)}
