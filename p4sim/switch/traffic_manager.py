"""The switch's egress queues: FIFOs per port and priority, drained at link rate.

This is what makes congestion real in the testbed. Every egress port has one FIFO per
priority (``--priority-queues N``; one by default) holding up to ``depth`` packets
(tail drop beyond), and a token bucket that lets packets leave at the port's rate in
bytes/s (``--port-rate``) and/or packets/s (``--queue-rate``, BMv2's
``set_queue_rate``). The queueing metadata handed to the egress pipeline are true
values from these queues, as in BMv2's simple_switch:

* ``enq_qdepth``: packets already in the packet's priority queue when it arrived;
* ``deq_qdepth``: packets left in that queue when it leaves;
* ``enq_timestamp``: arrival time, microseconds since the switch started;
* ``deq_timedelta``: microseconds it spent queued.

Scheduling is strict priority, highest priority value first (simple_switch maps
priority p to queue ``N-1-p`` and serves queue 0 first). A port without any rate
drains as fast as the device can transmit.

A port's rate is kept by the *ideal link's schedule* (virtual time): the link is free
at ``free_at``, when the serialisation of the last frame it sent would be over, and
the frame at the head of a queue may leave once ``free_at`` has passed. A frame that
leaves is put on the schedule at ``max(arrival, free_at)`` -- where the ideal link
would have started it -- whatever time it really left, and ``free_at`` moves on by
its serialisation at the port's rate (after the egress pipeline, so that its changes
to the size count). That models a link serialising one frame after the other:

* a port that was idle sends the first frame of a burst at once (``free_at`` is in
  the past), and the next ones each a serialisation time later -- no burst beyond
  the link rate;
* when the process wakes up late (timer slack, the CPU busy with other switches on a
  loaded machine), the frames that were due leave together and the schedule is kept:
  the link loses no time to the lateness, however short the queue behind the late
  frame. Lateness older than ``CATCHUP_SECONDS`` is not made up (a process stopped
  for seconds does not release seconds of traffic at once).

Fidelity (emulation/fidelity.py): every departure from a rate-limited port is held
against that schedule -- ``max(arrival, free_at)`` -- and its lateness, in packet
times of the port (an MTU frame's serialisation), is counted in the port's histogram. A departure less than half a serialisation time after
the previous one on a backlogged port is a *burst*: what the catch-up above sends when
the process was late, and what a real link never does.

Priority flow control (``pfc``, p4sim/switch/pfc.py): lossless priorities are admitted
by per-ingress-port accounting instead of the egress tail drop, PAUSE frames go out
through ``send_pause`` (the device's MAC) and paused queues are skipped by the
scheduler until their pause runs out on this clock.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from emulation.fidelity import LatenessHistogram
from p4sim.switch.pause import MAX_QUANTA, MIN_FRAME, QUANTUM_BITS
from p4sim.switch.pfc import PfcConfig, PortPfc

log = logging.getLogger(__name__)

# Lateness the schedule makes up for: the process can be kept off the CPU for tens, at
# times a couple of hundred, milliseconds when a dozen switches and their hosts share
# two cores. Making up for it keeps every port's average rate exact; the burst it
# causes is bounded by what is queued (the queue depth).
CATCHUP_SECONDS = 0.2
CATCHUP_US = CATCHUP_SECONDS * 1e6
DEFAULT_QUEUE_DEPTH = 64  # packets, BMv2's default per queue
# Largest frame of a port whose MTU is not given: Ethernet's 1500 plus header and tag.
DEFAULT_FRAME_BYTES = 1518
# A departure this fraction of a serialisation time (or less) after the previous one
# on a backlogged port is a burst (see the module docstring).
BURST_GAP = 0.5
# A port in XOFF repeats its PAUSE when this fraction of the pause it asked for is over,
# so the peer never resumes on its own while the ingress stays above XON.
XOFF_REFRESH = 0.5


@dataclass(slots=True)
class Dequeued:
    """A packet leaving its queue, with the queueing metadata for the egress pipeline."""

    port: int
    priority: int
    item: Any
    enq_timestamp: int
    enq_qdepth: int
    deq_qdepth: int
    deq_timedelta: int


class _Port:
    """Queues, schedule and counters of one egress port."""

    __slots__ = ("queues", "queued", "depth", "byte_rate", "pkt_rate", "drops", "enqueued",
                 "sent_packets", "sent_bytes", "max_qdepth", "frame_bytes", "packet_time", "free_at",
                 "last_departure", "last_serialisation", "lateness", "bursts", "bad_priority_reported",
                 "pfc", "no_rate_pause_reported")

    def __init__(self, priorities: int, depth: int) -> None:
        self.queues: list[deque] = [deque() for _ in range(priorities)]
        self.queued = 0  # packets in all of the port's queues
        self.depth = depth
        self.byte_rate: float | None = None  # bytes per second
        self.pkt_rate: float | None = None   # packets per second
        self.drops = 0
        self.enqueued = 0
        self.sent_packets = 0
        self.sent_bytes = 0
        self.max_qdepth = 0
        self.frame_bytes = DEFAULT_FRAME_BYTES  # an MTU frame: the port's packet time
        self.packet_time = 0.0     # us; 0 while the port has no rate (see retime)
        self.free_at = 0.0         # when the ideal link finishes its last frame (us)
        self.last_departure = 0    # when the last frame really left (us)
        self.last_serialisation = 0.0
        self.lateness = LatenessHistogram()
        self.bursts = 0
        self.bad_priority_reported = False
        self.pfc = PortPfc()
        self.no_rate_pause_reported = False

    def serialisation_us(self, size: int) -> float:
        """Time ``size`` bytes take on the link at its rates (0: no rate set)."""
        t = 0.0
        if self.byte_rate is not None:
            t = size / self.byte_rate * 1e6
        if self.pkt_rate is not None:
            t = max(t, 1e6 / self.pkt_rate)
        return t

    def retime(self) -> None:
        """Recompute the packet time after a change of rate or frame size."""
        self.packet_time = self.serialisation_us(self.frame_bytes)

    def depart(self, now: int, enq_ts: float, sent: int) -> None:
        """Put a departure at ``now`` of a frame ready since ``enq_ts`` on the ideal
        link's schedule (module docstring) and count how late it left."""
        serialisation = self.serialisation_us(sent)
        scheduled = max(enq_ts, self.free_at)
        self.free_at = max(scheduled, now - CATCHUP_US) + serialisation
        if not self.packet_time:
            return
        self.lateness.add((now - scheduled) / self.packet_time)
        if enq_ts < self.last_departure and \
                now - self.last_departure < BURST_GAP * self.last_serialisation:
            self.bursts += 1
        self.last_departure = now
        self.last_serialisation = serialisation

    def quanta_us(self, quanta: int) -> float:
        """How long ``quanta`` pause quanta last at the port's rate (0 without a byte rate)."""
        return quanta * QUANTUM_BITS / 8 / self.byte_rate * 1e6 if self.byte_rate else 0.0

    def head(self, now: float) -> tuple[int, deque] | None:
        """The highest-priority non-empty queue not paused at ``now``, and its priority."""
        paused_until = self.pfc.paused_until
        for priority in range(len(self.queues) - 1, -1, -1):
            if self.queues[priority] and paused_until[priority] <= now:
                return priority, self.queues[priority]
        return None


class TrafficManager:
    """Egress queues of all ports. Not thread-safe: the device serialises access.

    ``clock`` returns microseconds since the switch started (the same clock the
    pipeline engine uses for its timestamps).
    """

    def __init__(self, clock: Callable[[], int], priorities: int = 1,
                 depth: int = DEFAULT_QUEUE_DEPTH, queue_rate_pps: float | None = None,
                 pfc: PfcConfig | None = None) -> None:
        if priorities < 1:
            raise ValueError(f"priority queues per port must be >= 1, got {priorities}")
        _check_depth(depth)
        self.clock = clock
        self.priorities = priorities
        self.default_depth = depth
        self.default_pps = _check_rate(queue_rate_pps, "queue rate (pps)")
        self._ports: dict[int, _Port] = {}
        self._busy: set[int] = set()  # ports with a non-empty queue
        self.pfc: PfcConfig | None = None
        # The MAC: sends a PFC frame (priority -> quanta) out of a port at once.
        self.send_pause: Callable[[int, dict[int, int]], None] | None = None
        if pfc is not None:
            self.set_pfc(pfc)

    # ---- configuration (also used at run time by the P4Runtime queue-control call)

    def _port(self, port: int) -> _Port:
        state = self._ports.get(port)
        if state is None:
            state = _Port(self.priorities, self.default_depth)
            state.pkt_rate = self.default_pps
            state.retime()
            self._ports[port] = state
        return state

    def add_port(self, port: int) -> None:
        """Declare a port (so that it shows in ``stats`` before its first packet)."""
        self._port(port)

    def set_port_rate(self, port: int, bytes_per_s: float | None) -> None:
        """Set the port's line rate in bytes/s (None: unlimited)."""
        state = self._port(port)
        state.byte_rate = _check_rate(bytes_per_s, "port rate (bytes/s)")
        state.retime()

    def set_frame_bytes(self, port: int, frame_bytes: int) -> None:
        """The port's largest frame (MTU + Ethernet header): what one packet time means."""
        if frame_bytes < 64:
            raise ValueError(f"port {port}: largest frame must be >= 64 bytes, got {frame_bytes}")
        state = self._port(port)
        state.frame_bytes = frame_bytes
        state.retime()

    def set_queue_rate(self, port: int | None, pps: float | None) -> None:
        """Set a packets/s limit on one port, or on all (current and future) if port is None."""
        pps = _check_rate(pps, "queue rate (pps)")
        if port is None:
            self.default_pps = pps
        for state in (self._ports.values() if port is None else [self._port(port)]):
            state.pkt_rate = pps
            state.retime()

    def set_queue_depth(self, port: int | None, packets: int) -> None:
        """Set the capacity (packets per priority queue) of one port, or of all if None.

        Packets already queued beyond a reduced depth stay and drain normally.
        """
        _check_depth(packets)
        if port is None:
            self.default_depth = packets
        for state in (self._ports.values() if port is None else [self._port(port)]):
            state.depth = packets

    def set_pfc(self, config: PfcConfig | None) -> None:
        """Make ``config.priorities`` lossless (None: none). Every lossless priority
        needs its own queue."""
        if config is not None and max(config.priorities) >= self.priorities:
            raise ValueError(f"PFC priority {max(config.priorities)} needs --priority-queues "
                             f"{max(config.priorities) + 1} or more (the switch has {self.priorities})")
        now = self.clock()
        keep = config.priorities if config is not None else frozenset()
        for port, state in self._ports.items():
            for p in range(len(state.pfc.xoff)):
                if p in keep:
                    continue
                if state.pfc.xoff[p]:   # no longer lossless: let the peer go
                    state.pfc.xoff[p] = False
                    self._pause_out(port, p, 0, now)
                if state.pfc.paused(p, now):
                    state.pfc.pause(p, now, now)
                state.pfc.storm[p] = False
        self.pfc = config

    # ---- data path

    def enqueue(self, port: int, priority: int, item: Any, arrival: int | None = None,
                size: int = 0, in_port: int | None = None) -> bool:
        """Queue ``item`` for ``port``; False if it was dropped (queue full, bad priority,
        lossless headroom exhausted, a queue the PFC watchdog took out of service).

        ``arrival`` is when the packet arrived at the switch (clock microseconds; the
        kernel's receive time, so a frame that waited for the process is scheduled
        from when it was on the wire); default now. ``size`` (bytes) and ``in_port``
        feed the PFC accounting of a lossless priority (no ``in_port``: a packet made
        by the switch, e.g. a clone, which no peer can be paused for)."""
        state = self._port(port)
        if not 0 <= priority < self.priorities:
            # simple_switch drops such a packet too ("Priority out of range"); said once
            # per port, not once per packet (RoCE CNPs on a switch started without
            # --priority-queues would fill the log), counted in the port's drops.
            state.drops += 1
            if not state.bad_priority_reported:
                state.bad_priority_reported = True
                say_bad_priority(port, priority, self.priorities)
            return False
        queue = state.queues[priority]
        qdepth = len(queue)
        pfc = self.pfc
        lossless = pfc is not None and in_port is not None and priority in pfc.priorities
        if lossless:
            if state.pfc.storm[priority]:
                state.drops += 1
                state.pfc.storm_drops += 1
                return False
            ingress = self._port(in_port).pfc
            if ingress.ingress_bytes[priority] + size > pfc.xoff + pfc.headroom:
                state.drops += 1
                ingress.headroom_drops += 1
                return False
        elif qdepth >= state.depth:
            state.drops += 1
            return False
        now = clock_now = self.clock()
        if arrival is not None and arrival < now:
            now = arrival
        self._busy.add(port)
        queue.append((item, now, qdepth, in_port if lossless else None, size))
        if lossless:
            ingress.ingress_bytes[priority] += size
            if not ingress.xoff[priority] and ingress.ingress_bytes[priority] >= pfc.xoff:
                ingress.xoff[priority] = True
                self._pause_out(in_port, priority, MAX_QUANTA, clock_now)
        state.queued += 1
        state.enqueued += 1
        if qdepth + 1 > state.max_qdepth:
            state.max_qdepth = qdepth + 1
        return True

    def service(self, transmit: Callable[[Dequeued], int], until: int | None = None) -> None:
        """Dequeue every packet whose port's link was free by ``until`` (clock us;
        default and at most now) and hand it to ``transmit``.

        ``until`` is how the device serves the departures due before an arrival it has
        yet to enqueue (device.py, ``Device._handle``): later ones wait, so the arrival
        finds the queue as it was at its arrival time. Departures still happen now:
        their queueing metadata and lateness are the real ones. ``transmit`` runs the
        egress pipeline and sends; it returns the number of bytes put on the port's
        link, which move the port's schedule on by their serialisation time.
        """
        at = self.clock() if until is None else min(until, self.clock())
        if self.pfc is not None:
            self._pfc_timers(at)
        # Ports in ascending order, not the set's: the order is visible (a departure's
        # XON moves its ingress port's schedule), and the native engine keeps it too.
        for port in sorted(self._busy):
            state = self._ports[port]
            while state.queued:
                if at < state.free_at:
                    break
                head = state.head(at)
                if head is None:
                    break  # every queue with packets is paused
                priority, queue = head
                item, enq_ts, enq_qdepth, in_port, size = queue.popleft()
                state.queued -= 1
                now = self.clock()
                if in_port is not None:
                    self._release(in_port, priority, size, now)
                sent = transmit(Dequeued(port, priority, item, enq_ts, enq_qdepth,
                                         len(queue), now - enq_ts))
                if sent:
                    state.sent_packets += 1
                    state.sent_bytes += sent
                    # A frame held by a PAUSE was ready when the pause ended: the
                    # ideal link sends it from then, not from its arrival (no burst
                    # to make up for the paused time).
                    state.depart(now, max(enq_ts, state.pfc.paused_until[priority]), sent)
            if not state.queued:
                self._busy.discard(port)

    def next_deadline(self) -> int | None:
        """Clock time (us) when some queued packet may leave or a PFC timer (XOFF
        refresh, watchdog) falls due; None if there is nothing to wait for."""
        times = []
        for p in self._busy:
            state = self._ports[p]
            due = state.free_at
            if self.pfc is not None:
                # A paused queue waits for its pause to run out.
                due = max(due, min(state.pfc.paused_until[q] for q, queue in enumerate(state.queues) if queue))
            times.append(due)
        if self.pfc is not None:
            times += self._pfc_deadlines(self.clock())
        return int(min(times)) + 1 if times else None

    # ---- priority flow control (p4sim/switch/pfc.py)

    def _pause_out(self, port: int, priority: int, quanta: int, now: float) -> None:
        """Send a PFC frame for ``priority`` out of ``port`` (the MAC puts it between two
        frames: the link's schedule makes room for it)."""
        state = self._port(port)
        state.pfc.pause_tx[priority] += 1
        lasts = state.quanta_us(quanta)
        state.pfc.refresh_at[priority] = now + XOFF_REFRESH * lasts if lasts else 0.0
        state.free_at = max(state.free_at, now) + state.serialisation_us(MIN_FRAME)
        if self.send_pause is not None:
            self.send_pause(port, {priority: quanta})

    def _release(self, in_port: int, priority: int, size: int, now: float) -> None:
        """A lossless packet left its queue: its ingress port's account goes down, and a
        port in XOFF at or below XON sends the resume."""
        ingress = self._ports[in_port].pfc
        ingress.ingress_bytes[priority] -= size
        if ingress.xoff[priority] and ingress.ingress_bytes[priority] <= self.pfc.xon:
            ingress.xoff[priority] = False
            self._pause_out(in_port, priority, 0, now)

    def receive_pause(self, port: int, quanta: dict[int, int], arrival: int | None = None) -> None:
        """A PAUSE came in by ``port`` (priority -> quanta; 0 resumes): its queues of the
        lossless priorities stop for that long. PAUSE for a lossy priority is ignored,
        as a switch without PFC on that priority ignores it; it is still counted."""
        state = self._port(port)
        now = self.clock() if arrival is None else min(arrival, self.clock())
        for priority, q in quanta.items():
            state.pfc.pause_rx[priority] += 1
            state.pfc.last_pause_rx[priority] = now
            if self.pfc is None or priority not in self.pfc.priorities or state.pfc.storm[priority]:
                continue
            if q and not state.byte_rate and not state.no_rate_pause_reported:
                state.no_rate_pause_reported = True
                say_pause_without_rate(port)
            state.pfc.pause(priority, now, now + state.quanta_us(q))

    def _pfc_deadlines(self, now: float) -> list[float]:
        """When XOFF refreshes, watchdog trips (of queues paused at ``now`` with packets
        waiting) and storm restorations fall due."""
        pfc = self.pfc
        times = []
        for state in self._ports.values():
            s = state.pfc
            for p in pfc.priorities:
                if s.xoff[p] and s.refresh_at[p] > 0:
                    times.append(s.refresh_at[p])
                if pfc.watchdog_us:
                    if s.storm[p]:
                        times.append(s.last_pause_rx[p] + pfc.watchdog_us)
                    elif state.queues[p] and s.paused(p, now):
                        times.append(s.paused_since[p] + pfc.watchdog_us)
        return times

    def _pfc_timers(self, now: float) -> None:
        """Refresh the XOFFs due, trip the watchdog on queues paused too long, restore
        queues whose storm is over."""
        pfc = self.pfc
        for port, state in self._ports.items():
            s = state.pfc
            for p in pfc.priorities:
                if s.xoff[p] and 0 < s.refresh_at[p] <= now:
                    self._pause_out(port, p, MAX_QUANTA, now)
                if not pfc.watchdog_us:
                    continue
                if s.storm[p]:
                    if now - s.last_pause_rx[p] >= pfc.watchdog_us:
                        s.storm[p] = False
                        say_storm_over(port, p, pfc.watchdog_us)
                elif state.queues[p] and s.paused(p, now) and now - s.paused_since[p] >= pfc.watchdog_us:
                    self._storm(port, state, p, now)

    def _storm(self, port: int, state: _Port, priority: int, now: float) -> None:
        """The watchdog's action: the queue stops being lossless and is emptied."""
        s = state.pfc
        s.storm[priority] = True
        s.storms += 1
        paused_us = now - s.paused_since[priority]
        s.pause(priority, now, now)
        queue = state.queues[priority]
        dropped = len(queue)
        while queue:
            _, _, _, in_port, size = queue.popleft()
            if in_port is not None:
                self._release(in_port, priority, size, now)
        state.queued -= dropped
        state.drops += dropped
        s.storm_drops += dropped
        say_storm(port, priority, paused_us, dropped)

    # ---- observation

    def packet_time_us(self) -> float | None:
        """The shortest packet time (us) among rate-limited ports; None if no port has a
        rate. The device's wake-up quantum is a fraction of it."""
        times = [s.packet_time for s in self._ports.values() if s.packet_time]
        return min(times) if times else None

    def fidelity(self) -> tuple[LatenessHistogram, int, float | None]:
        """All ports' departures against the ideal links: merged lateness histogram,
        bursts, and the shortest packet time (us) among rate-limited ports (None: none)."""
        merged, bursts = LatenessHistogram(), 0
        for s in self._ports.values():
            merged = merged.merged(s.lateness)
            bursts += s.bursts
        return merged, bursts, self.packet_time_us()

    def backlog(self) -> int:
        """Packets queued on all ports."""
        return sum(self._ports[p].queued for p in self._busy)

    def drops(self, port: int) -> int:
        """Packets dropped at enqueue on ``port`` (queue full or priority out of range)."""
        state = self._ports.get(port)
        return 0 if state is None else state.drops

    def stats(self) -> dict[int, dict[str, float | int | None]]:
        """Per-port counters and settings, for logs and the queue-control API."""
        now = self.clock()
        return {
            port: {
                "rate_bytes_per_s": s.byte_rate, "rate_pps": s.pkt_rate, "depth": s.depth,
                "qdepth": s.queued, "max_qdepth": s.max_qdepth, "enqueued": s.enqueued,
                "drops": s.drops, "sent_packets": s.sent_packets, "sent_bytes": s.sent_bytes,
                "frame_bytes": s.frame_bytes, "bursts": s.bursts, "lateness": s.lateness.to_json(),
                "pfc": s.pfc.to_json(now),
            }
            for port, s in sorted(self._ports.items())
        }


# What the traffic manager says in the log; the native one (p4sim/switch/native/tm.py)
# reports the same events in the same words.

def say_bad_priority(port: int, priority: int, priorities: int) -> None:
    log.error("port %d: priority %d out of range (0..%d): dropping such packets, as "
              "simple_switch does (start the switch with --priority-queues %d to queue "
              "them); said once, counted in the port's drops",
              port, priority, priorities - 1, max(priority + 1, 8))


def say_pause_without_rate(port: int) -> None:
    log.warning("port %d: PAUSE received but the port has no line rate (--port-rate): "
                "its quanta last no time", port)


def say_storm(port: int, priority: int, paused_us: float, dropped: int) -> None:
    log.warning("PFC watchdog: port %d priority %d paused for %.0f ms with packets waiting "
                "(a pause storm): no longer lossless, %d packets discarded and the next ones "
                "too until the PAUSEs stop", port, priority, paused_us / 1e3, dropped)


def say_storm_over(port: int, priority: int, watchdog_us: float) -> None:
    log.warning("PFC watchdog: port %d priority %d: no PAUSE for %.0f ms, lossless again",
                port, priority, watchdog_us / 1e3)


def _check_rate(rate: float | None, what: str) -> float | None:
    if rate is None:
        return None
    if rate <= 0:
        raise ValueError(f"{what} must be > 0 (or unset for unlimited), got {rate}")
    return float(rate)


def _check_depth(depth: int) -> None:
    if depth < 1:
        raise ValueError(f"queue depth must be >= 1 packet, got {depth}")
