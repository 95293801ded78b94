"""Link telemetry for experiments: every switch's per-port traffic-manager counters
(bytes and packets sent, tail drops, current queue depth), polled on a thread.

Why not GOR's telemetry: the configurations without GOR must be measured the same way
as the one with it, and P4Runtime allows one primary per switch. p4sim's QueueControl
service (``GetQueueStats``, next to P4Runtime on the switch's gRPC address) needs no
arbitration, so the recorder runs beside GOR or without it and costs every
configuration the same.

Times are the fabric's emulated seconds (emulation/clock.py), so utilisations are
bytes over emulated time whatever the dilation. `Recorder.fidelity` reads every
switch's fidelity counters (GetFidelity) for a run's before/after snapshots.

`link_intervals` turns the recorded rounds into per-link intervals (pure, tested);
`Recording.write_log` writes them in the telemetry-log format `insight` reads
(``{"ts": .., "links": {"a->b": {"queue_depth": n, ...}}}``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import grpc

from controller.telemetry import LinkMap
from emulation.clock import EmulationClock
from p4sim.runtime.queues import QueueControlClient, fidelity_of
from topo.addressing import AddressPlan


@dataclass(frozen=True)
class Round:
    """One poll of every switch: when it ended (emulated and wall clock), per switch
    its port counters (port -> {sent_bytes, sent_packets, drops, qdepth}) and when it
    answered (emulated: midway between asking and the answer; rates use these, since
    the switches are asked one after another on a busy CPU)."""

    t: float
    ts: float
    switches: Mapping[str, Mapping[int, Mapping[str, Any]]]
    times: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Interval:
    """One link between two consecutive rounds."""

    t: float            # end of the interval (emulated seconds)
    ts: float           # end of the interval (wall clock)
    seconds: float
    bytes: int
    packets: int
    drops: int
    queue_depth: int
    util: float


def _when(port: Mapping[str, Any], answered: float) -> float:
    """When a port's counters were read: the switch's own stamp (``t_us``, emulated),
    else when it answered."""
    t_us = port.get("t_us")
    return answered if t_us is None else t_us / 1e6


def _delta(new: int, old: int) -> int:
    return new - old if new >= old else new      # a restarted switch counts from zero


def link_intervals(links: LinkMap, rounds: Sequence[Round]) -> dict[str, list[Interval]]:
    """Per directed link (``a->b``, transmitted by a switch port), its intervals."""
    out: dict[str, list[Interval]] = {f"{a}->{b}": [] for (a, b) in links.tx.values()}
    for old, new in zip(rounds, rounds[1:]):
        for (switch, port), (a, b) in links.tx.items():
            before = old.switches.get(switch, {}).get(port)
            after = new.switches.get(switch, {}).get(port)
            if before is None or after is None:
                continue
            dt = _when(after, new.times.get(switch, new.t)) - _when(before, old.times.get(switch, old.t))
            if dt <= 0:
                continue
            nbytes = _delta(int(after.get("sent_bytes", 0)), int(before.get("sent_bytes", 0)))
            out[f"{a}->{b}"].append(Interval(
                new.t, new.ts, dt, nbytes,
                _delta(int(after.get("sent_packets", 0)), int(before.get("sent_packets", 0))),
                _delta(int(after.get("drops", 0)), int(before.get("drops", 0))),
                int(after.get("qdepth", 0)), nbytes * 8 / dt / links.capacity[(a, b)]))
    return out


def window(rounds: Sequence[Round], start: float, end: float) -> list[Round]:
    """The rounds from the last one at or before ``start`` to the first at or after
    ``end`` (so that the intervals cover [start, end])."""
    first = max([i for i, r in enumerate(rounds) if r.t <= start], default=0)
    last = min([i for i, r in enumerate(rounds) if r.t >= end], default=len(rounds) - 1)
    return list(rounds[first:last + 1])


@dataclass
class Recording:
    """What a recorder collected."""

    plan: AddressPlan
    rounds: list[Round] = field(default_factory=list)

    def intervals(self, start: float | None = None, end: float | None = None) -> dict[str, list[Interval]]:
        ordered = sorted(self.rounds, key=lambda r: r.t)
        rounds = ordered if start is None else window(ordered, start, end if end is not None else start)
        return link_intervals(LinkMap(self.plan), rounds)

    def write_log(self, path: str | Path, start: float | None = None, end: float | None = None,
                  rename: Callable[[str], str] = str) -> Path:
        """The intervals as a telemetry log (JSON lines), one record per round; link
        names passed through ``rename`` (e.g. to drop a fabric's node prefix)."""
        by_time: dict[float, dict[str, Any]] = {}
        for link, series in self.intervals(start, end).items():
            link = rename(link)
            for iv in series:
                rec = by_time.setdefault(iv.t, {"ts": round(iv.ts, 6), "links": {}})
                rec["links"][link] = {"queue_depth": iv.queue_depth, "util": round(iv.util, 4),
                                      "bytes": iv.bytes, "packets": iv.packets, "drops": iv.drops}
        path = Path(path)
        path.write_text("".join(json.dumps(by_time[t]) + "\n" for t in sorted(by_time)), encoding="utf-8")
        return path


class RecorderError(RuntimeError):
    """A switch whose counters cannot be read (e.g. a backend without QueueControl)."""


class Recorder:
    """Polls every switch of ``plan`` each ``interval_s`` (emulated) on a thread
    (`start`/`stop`); ``clock`` is the fabric's (default: a fresh undilated one)."""

    def __init__(self, plan: AddressPlan, interval_s: float = 0.25,
                 clock: EmulationClock | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"recorder interval must be > 0 s, got {interval_s}")
        self.plan = plan
        self.interval_s = interval_s
        self.clock = clock or EmulationClock.start()
        self.recording = Recording(plan)
        self._channels = {sw.name: grpc.insecure_channel(sw.grpc_address) for sw in plan.switches}
        self._clients = {n: QueueControlClient(c, timeout=2.0) for n, c in self._channels.items()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    def poll(self) -> Round:
        """Read every switch once (a switch that does not answer is left out)."""
        answers: dict[str, Mapping[int, Mapping[str, Any]]] = {}
        times: dict[str, float] = {}
        now = self.clock.now
        for name, client in self._clients.items():
            asked = now()
            try:
                answers[name] = client.queue_stats()
            except grpc.RpcError:
                self.errors += 1
                continue
            times[name] = (asked + now()) / 2
        return Round(now(), time.time(), answers, times)

    def fidelity(self) -> dict[str, dict[str, Any]]:
        """Every switch's cumulative fidelity counters (a switch that does not answer is
        left out, and counts from zero in `emulation.fidelity.switches_window`)."""
        answers = fidelity_of(self._clients)
        self.errors += len(self._clients) - len(answers)
        return answers

    def start(self) -> "Recorder":
        first = self.poll()
        if not first.switches:
            self.close()
            raise RecorderError("no switch answered p4sim's QueueControl GetQueueStats "
                                "(the experiment runner needs the p4sim backend)")
        self.recording.rounds.append(first)
        self._thread = threading.Thread(target=self._run, name="experiment-recorder", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_t = self.clock.now()
        while not self._stop.is_set():
            next_t += self.interval_s
            self.clock.wait(self._stop, next_t - self.clock.now())
            if self._stop.is_set():
                break
            self.recording.rounds.append(self.poll())

    def wait_past(self, t: float) -> None:
        """Block until a round later than ``t`` exists (so intervals cover up to ``t``)."""
        end = self.clock.now() + 3 * self.interval_s + 2.0
        while not any(r.t >= t for r in self.recording.rounds[-3:]) and self.clock.now() < end:
            self.clock.sleep(self.interval_s / 4)

    def stop(self) -> Recording:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self.close()
        return self.recording

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
