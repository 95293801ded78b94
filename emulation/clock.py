"""The emulation clock: one time base for every process of a fabric.

Every timed component -- the switches' traffic managers and v1model timestamps, the
agents' pacers, DCQCN timers and retransmission timeouts, GOR's tick, the experiment
recorder -- reads emulated time from an `EmulationClock` it is given, never the wall
clock on its own. Emulated time is CLOCK_MONOTONIC since the fabric's origin divided by
the *dilation* (wall seconds per emulated second): with dilation 2 a 10 Mbit/s link
serialises at 5 Mbit/s of wall time and every timer takes twice as long, so a machine
too slow for the fabric at full speed gives the same numbers, later (Mininet-HiFi's
time dilation, DieCast). CLOCK_MONOTONIC is one clock for all network namespaces, so
processes in Mininet hosts and in the root namespace agree to the nanosecond.

A clock crosses process boundaries as text, ``<origin_ns>:<dilation>``, in the
``ASTRAL_CLOCK`` environment variable or a ``--clock`` flag (`encode`, `decode`).
The dilation is fixed for the life of a fabric: changing it under running timers would
stretch some intervals and not others.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass

ENV = "ASTRAL_CLOCK"


class ClockError(ValueError):
    """A clock description that cannot be used (says which part is wrong)."""


@dataclass(frozen=True)
class EmulationClock:
    """Emulated seconds since ``origin_ns`` (CLOCK_MONOTONIC), slowed by ``dilation``.

    >>> clock = EmulationClock.start(dilation=2.0)
    >>> clock.wall_s(0.010)        # a 10 ms emulated timer sleeps 20 ms
    0.02
    """

    origin_ns: int
    dilation: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.dilation) and self.dilation >= 1.0):
            raise ClockError(f"dilation must be a finite number >= 1 (wall seconds per "
                             f"emulated second), got {self.dilation}")

    @classmethod
    def start(cls, dilation: float = 1.0) -> "EmulationClock":
        """A clock whose emulated time 0 is now."""
        return cls(time.monotonic_ns(), float(dilation))

    # ---- reading

    def now(self) -> float:
        """Emulated seconds since the origin."""
        return (time.monotonic_ns() - self.origin_ns) / (self.dilation * 1e9)

    def now_us(self) -> int:
        """Emulated microseconds since the origin (the switches' timestamp unit)."""
        return int((time.monotonic_ns() - self.origin_ns) / (self.dilation * 1e3))

    def from_monotonic_ns(self, ns: int) -> float:
        """Emulated seconds at CLOCK_MONOTONIC time ``ns`` (e.g. a kernel timestamp)."""
        return (ns - self.origin_ns) / (self.dilation * 1e9)

    def us_at_monotonic_ns(self, ns: int) -> int:
        """Emulated microseconds at CLOCK_MONOTONIC time ``ns`` (`now_us`'s unit)."""
        return int((ns - self.origin_ns) / (self.dilation * 1e3))

    def shifted(self, offset_ns: int) -> "EmulationClock":
        """The same clock read on a machine whose CLOCK_MONOTONIC is ``offset_ns`` ahead
        of this one's (`emulation.clocksync`): same emulated instant, same dilation."""
        return EmulationClock(self.origin_ns + offset_ns, self.dilation)

    # ---- waiting

    def wall_s(self, emulated_s: float) -> float:
        """Wall seconds that ``emulated_s`` emulated seconds take (for timeouts)."""
        return emulated_s * self.dilation

    def sleep(self, emulated_s: float) -> None:
        if emulated_s > 0:
            time.sleep(emulated_s * self.dilation)

    def wait(self, event: threading.Event, emulated_s: float) -> bool:
        """``event.wait`` for ``emulated_s`` of emulated time; True if it was set."""
        return event.wait(max(0.0, emulated_s) * self.dilation)

    # ---- crossing process boundaries

    def encode(self) -> str:
        return f"{self.origin_ns}:{self.dilation!r}"

    @classmethod
    def decode(cls, text: str, where: str = ENV) -> "EmulationClock":
        """Parse ``<origin_ns>:<dilation>``; ``where`` names the source in errors."""
        origin, sep, dilation = text.strip().partition(":")
        try:
            return cls(int(origin), float(dilation) if sep else 1.0)
        except ValueError as e:
            raise ClockError(f"{where}: expected <origin_ns>:<dilation>, got {text!r} ({e})") from e

    @classmethod
    def from_env(cls) -> "EmulationClock":
        """The fabric's clock from ``ASTRAL_CLOCK``; a fresh undilated one if unset
        (a component run on its own, outside a fabric)."""
        text = os.environ.get(ENV)
        return cls.decode(text) if text else cls.start()
