"""GOR's structured event log: one JSON object per line, each with the wall-clock time
(``ts``, seconds since the epoch) and the fabric's emulated time (``t``, for
differences: loop latencies are in emulated seconds, like every figure).

Every step of a reroute loop is an event carrying the loop's number (``loop``):
``detect`` (an alarm reached the acting level) -> ``decide`` (flow, path, port chosen)
-> ``command`` (sent to the agent) -> ``commanded`` and ``moved`` (the agent
acknowledged: the flow sends on its new port) -> ``verified`` (the data plane shows
the flow on its new path) -> ``cleared`` (the alarm is gone), or ``rolled_back`` /
``failed``. `loop_latencies` reads the loop times back from a log,
so loop latency is measured from the record, not guessed.

    {"ts": 1764500000.12, "t": 812.33, "event": "moved", "loop": 1, "flow": "10.0.0.1:50123->10.1.1.2"}
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable

# Events kept in memory for the REPL's `events` command.
MEMORY = 500


class EventLog:
    """JSON-lines log (a new file per run), safe to use from several threads."""

    def __init__(self, path: str | Path | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path) if path else None
        self.clock = clock
        self.recent: deque[dict[str, Any]] = deque(maxlen=MEMORY)
        self._lock = threading.Lock()
        # One log per controller run: loop numbers restart with the controller.
        self._file = open(self.path, "w", encoding="utf-8") if self.path else None

    def emit(self, event: str, t: float | None = None, **fields: Any) -> dict[str, Any]:
        """Record one event now (or at emulated time ``t``); returns the record."""
        now = self.clock()
        record = {"ts": round(time.time() - (now - t if t is not None else 0.0), 6),
                  "t": round(now if t is None else t, 6), "event": event, **fields}
        line = json.dumps(record, default=str)
        with self._lock:
            self.recent.append(record)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
        return record

    def snapshot(self) -> list[dict[str, Any]]:
        """The events kept in memory, oldest first (a copy: the loop keeps appending)."""
        with self._lock:
            return list(self.recent)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The records of a log file, in order."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def loop_latencies(events: Iterable[dict[str, Any]], end: str = "moved") -> dict[int, float]:
    """Seconds from ``detect`` to ``end`` (``moved`` or ``cleared``) for every loop
    that got there, by loop number."""
    start: dict[int, float] = {}
    out: dict[int, float] = {}
    for e in events:
        loop = e.get("loop")
        if loop is None:
            continue
        if e["event"] == "detect":
            start[loop] = e["t"]
        elif e["event"] == end and loop in start:
            out[loop] = e["t"] - start[loop]
    return out


def move_latencies(events: Iterable[dict[str, Any]], end: str = "moved") -> list[float]:
    """Seconds from the alarm a move relieves to its flow sending on the new port
    (``moved``: the agent's answer) -- or, with ``end="verified"``, to the data plane
    showing it on its new path -- for every such event of an automatic loop (a loop may
    move several flows: each is its own detect -> moved time)."""
    return [float(e["latency_s"]) for e in events if e.get("event") == end and "latency_s" in e]


# A flow's own steps in a loop (events that name it by its ``flow_id``).
FLOW_STEPS = frozenset({"detect", "skip", "command", "commanded", "command_failed", "command_timeout", "moved",
                        "verified", "not_verified", "retry", "measured", "rolled_back"})
# A loop's steps that concern all of its moves (a plan's loop has ``plan`` for ``detect``).
LOOP_STEPS = frozenset({"detect", "plan", "cleared", "not_cleared"})


def flow_story(events: Iterable[dict[str, Any]], flow_id: int) -> dict[int, list[dict[str, Any]]]:
    """Every reroute loop that decided about flow ``flow_id`` (moved it, or named it),
    by loop number, in order: its ``detect``, its ``decide`` with only this flow's
    move (and the candidates simulated), the flow's own steps (command ... measured;
    by id, as its label changes with its source port), and the loop's
    ``cleared``/``not_cleared`` -- what `why FLOW` at GOR's prompt shows."""
    by_loop: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("loop") is not None:
            by_loop.setdefault(e["loop"], []).append(e)
    out: dict[int, list[dict[str, Any]]] = {}
    for loop, steps in by_loop.items():
        story, named = [], False
        for e in steps:
            if e["event"] == "decide":
                moves = [m for m in e.get("moves", ()) if m.get("flow_id") == flow_id]
                if moves:
                    story.append({**e, "moves": moves})
                    named = True
            elif e.get("flow_id") == flow_id and e["event"] in FLOW_STEPS:
                story.append(e)
                named = True
            elif e["event"] in LOOP_STEPS and "flow_id" not in e:
                story.append(e)
        if named:
            out[loop] = story
    return out
