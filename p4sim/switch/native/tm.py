"""The native traffic manager (tm.c) behind `TrafficManager`'s interface.

The native device loop calls tm.c directly, frame by frame; from Python it is
configured (QueueControl: port and queue rates, depths, PFC) and read (queue stats,
fidelity) through this class. Its data path (`enqueue`, `service`, `receive_pause`)
takes Python items too, so that one harness can drive both engines' traffic managers
through the same calls and compare everything they do (tests/test_native_tm.py); an
item crosses into C as a number and back. Once a native device drives the manager (its
callbacks become the device's), the data path is the device's alone.

The model's constants are handed to C from the modules that own them
(traffic_manager.py, pause.py, emulation/fidelity.py).
"""

from __future__ import annotations

from typing import Any, Callable

from emulation.fidelity import BOUNDS, LatenessHistogram
from p4sim.switch import traffic_manager as reference
from p4sim.switch.native.libswitch import load
from p4sim.switch.pause import MAX_QUANTA, MIN_FRAME, PRIORITIES, QUANTUM_BITS
from p4sim.switch.pfc import PfcConfig, PortPfc
from p4sim.switch.traffic_manager import (DEFAULT_QUEUE_DEPTH, Dequeued, _check_depth,
                                          _check_rate)

EVENTS_BATCH = 16


class NativeTrafficManager:
    """Egress queues of all ports, in C. Not thread-safe: the device serialises access.

    ``clock`` returns emulated microseconds, as `TrafficManager`'s; ports are
    0..P4N_TM_MAX_PORTS-1 (v1model's 9-bit port numbers) and priorities 1..8.
    """

    def __init__(self, clock: Callable[[], int], priorities: int = 1,
                 depth: int = DEFAULT_QUEUE_DEPTH, queue_rate_pps: float | None = None,
                 pfc: PfcConfig | None = None) -> None:
        if not 1 <= priorities <= PRIORITIES:
            raise ValueError(f"priority queues per port must be 1..{PRIORITIES}, got {priorities}")
        _check_depth(depth)
        self.clock = clock
        self.priorities = priorities
        self.ffi, self.lib = load()
        ffi, lib = self.ffi, self.lib
        self._bounds = ffi.new("double[]", BOUNDS)
        model = ffi.new("p4n_tm_model *", {
            "catchup_us": reference.CATCHUP_US, "burst_gap": reference.BURST_GAP,
            "xoff_refresh": reference.XOFF_REFRESH, "min_frame": MIN_FRAME,
            "quantum_bits": QUANTUM_BITS, "max_quanta": MAX_QUANTA,
            "bounds": self._bounds, "n_bounds": len(BOUNDS)})
        tm = lib.p4n_tm_new(priorities, depth, _rate(_check_rate(queue_rate_pps, "queue rate (pps)")), model)
        if tm == ffi.NULL:
            raise MemoryError("native traffic manager: out of memory")
        self.tm = ffi.gc(tm, lib.p4n_tm_free)
        self.pfc: PfcConfig | None = None
        self.send_pause: Callable[[int, dict[int, int]], None] | None = None
        self._items: dict[int, Any] = {}
        self._next_item = 1
        self._transmit: Callable[[Dequeued], int] | None = None
        self._error: BaseException | None = None
        self._events = ffi.new("p4n_tm_event[]", EVENTS_BATCH)
        self._cb_pause = ffi.callback("p4n_pause_fn", self._on_pause, onerror=self._on_error)
        self._cb_drop = ffi.callback("p4n_drop_fn", self._on_drop, onerror=self._on_error)
        self._cb_transmit = ffi.callback("p4n_transmit_fn", self._on_transmit, onerror=self._on_error)
        lib.p4n_tm_set_callbacks(self.tm, self._cb_pause, self._cb_drop, ffi.NULL)
        if pfc is not None:
            self.set_pfc(pfc)

    # ---- configuration

    def add_port(self, port: int) -> None:
        self._check(self.lib.p4n_tm_add_port(self.tm, _port(port)))

    def set_port_rate(self, port: int, bytes_per_s: float | None) -> None:
        rate = _rate(_check_rate(bytes_per_s, "port rate (bytes/s)"))
        self._check(self.lib.p4n_tm_set_port_rate(self.tm, _port(port), rate))

    def set_frame_bytes(self, port: int, frame_bytes: int) -> None:
        if frame_bytes < 64:
            raise ValueError(f"port {port}: largest frame must be >= 64 bytes, got {frame_bytes}")
        self._check(self.lib.p4n_tm_set_frame_bytes(self.tm, _port(port), frame_bytes))

    def set_queue_rate(self, port: int | None, pps: float | None) -> None:
        rate = _rate(_check_rate(pps, "queue rate (pps)"))
        self._check(self.lib.p4n_tm_set_queue_rate(self.tm, -1 if port is None else _port(port), rate))

    def set_queue_depth(self, port: int | None, packets: int) -> None:
        _check_depth(packets)
        self._check(self.lib.p4n_tm_set_queue_depth(self.tm, -1 if port is None else _port(port), packets))

    def set_pfc(self, config: PfcConfig | None) -> None:
        if config is not None and max(config.priorities) >= self.priorities:
            raise ValueError(f"PFC priority {max(config.priorities)} needs --priority-queues "
                             f"{max(config.priorities) + 1} or more (the switch has {self.priorities})")
        if config is None:
            self._check(self.lib.p4n_tm_set_pfc(self.tm, self.clock(), 0, 0, 0, 0, 0, 0.0))
        else:
            mask = sum(1 << p for p in config.priorities)
            self._check(self.lib.p4n_tm_set_pfc(self.tm, self.clock(), 1, mask, config.xoff, config.xon,
                                                config.headroom, config.watchdog_us))
        self.pfc = config

    # ---- data path

    def enqueue(self, port: int, priority: int, item: Any, arrival: int | None = None,
                size: int = 0, in_port: int | None = None) -> bool:
        """`TrafficManager.enqueue`."""
        if priority < 0:
            raise ValueError(f"priority must be >= 0, got {priority}")
        now = self.clock()
        handle = self._next_item
        self._next_item += 1
        self._items[handle] = item
        admitted = self.lib.p4n_tm_enqueue(
            self.tm, now, _port(port), min(priority, 0xFFFFFFFF),
            self.ffi.cast("void *", handle), now if arrival is None else arrival, size,
            -1 if in_port is None else _port(in_port))
        self._after()
        self._check(admitted)
        if not admitted:
            del self._items[handle]
        return bool(admitted)

    def service(self, transmit: Callable[[Dequeued], int], until: int | None = None) -> None:
        """`TrafficManager.service`: ``transmit`` runs for every departure due by ``until``
        (default now)."""
        self._transmit = transmit
        now = self.clock()
        try:
            self.lib.p4n_tm_service(self.tm, now if until is None else until, now,
                                    self._cb_transmit, self.ffi.NULL)
        finally:
            self._transmit = None
        self._after()

    def next_deadline(self) -> int | None:
        deadline = self.ffi.new("int64_t *")
        return deadline[0] if self.lib.p4n_tm_next_deadline(self.tm, self.clock(), deadline) else None

    def receive_pause(self, port: int, quanta: dict[int, int], arrival: int | None = None) -> None:
        """`TrafficManager.receive_pause`."""
        now = self.clock() if arrival is None else min(arrival, self.clock())
        for priority, q in quanta.items():
            if not 0 <= priority < PRIORITIES:
                raise ValueError(f"PFC priority must be 0..{PRIORITIES - 1}, got {priority}")
            self._check(self.lib.p4n_tm_receive_pause(self.tm, now, _port(port), priority, q))
        self._after()

    # ---- observation

    def packet_time_us(self) -> float | None:
        return self.lib.p4n_tm_packet_time_us(self.tm) or None

    def fidelity(self) -> tuple[LatenessHistogram, int, float | None]:
        merged, bursts = LatenessHistogram(), 0
        for port in self._ports():
            s = self.lib.p4n_tm_port_get(self.tm, port)
            merged = merged.merged(self._lateness(s))
            bursts += s.bursts
        return merged, bursts, self.packet_time_us()

    def backlog(self) -> int:
        return self.lib.p4n_tm_backlog(self.tm)

    def drops(self, port: int) -> int:
        s = self.lib.p4n_tm_port_get(self.tm, _port(port))
        return 0 if s == self.ffi.NULL else s.drops

    def stats(self) -> dict[int, dict[str, float | int | None]]:
        """`TrafficManager.stats`, the same keys and values."""
        now = self.clock()
        out = {}
        for port in self._ports():
            s = self.lib.p4n_tm_port_get(self.tm, port)
            out[port] = {
                "rate_bytes_per_s": s.byte_rate or None, "rate_pps": s.pkt_rate or None,
                "depth": s.depth, "qdepth": s.queued, "max_qdepth": s.max_qdepth,
                "enqueued": s.enqueued, "drops": s.drops, "sent_packets": s.sent_packets,
                "sent_bytes": s.sent_bytes, "frame_bytes": s.frame_bytes, "bursts": s.bursts,
                "lateness": self._lateness(s).to_json(), "pfc": _port_pfc(s.pfc).to_json(now),
            }
        return out

    # ---- between C and Python

    def _ports(self) -> list[int]:
        out = self.ffi.new("uint32_t[]", self.lib.P4N_TM_MAX_PORTS)
        return list(out[0:self.lib.p4n_tm_ports(self.tm, out, self.lib.P4N_TM_MAX_PORTS)])

    def _lateness(self, s: Any) -> LatenessHistogram:
        n = self.lib.p4n_tm_lateness_buckets(self.tm)
        return LatenessHistogram(list(s.lateness[0:n]), s.lateness_max)

    def _on_transmit(self, _ctx: Any, d: Any) -> int:
        self.report_events()
        item = self._items.pop(int(self.ffi.cast("uintptr_t", d.item)))
        return self._transmit(Dequeued(d.port, d.priority, item, d.enq_timestamp, d.enq_qdepth,
                                       d.deq_qdepth, d.deq_timedelta))

    def _on_pause(self, _ctx: Any, port: int, priority: int, quanta: int) -> None:
        self.report_events()
        if self.send_pause is not None:
            self.send_pause(port, {priority: quanta})

    def _on_drop(self, _ctx: Any, item: Any) -> None:
        del self._items[int(self.ffi.cast("uintptr_t", item))]

    def _on_error(self, exc_type: type, exc: BaseException, tb: Any) -> None:
        # An exception cannot cross C: kept, and raised when the call into C returns.
        if self._error is None:
            self._error = exc

    def _after(self) -> None:
        """Say what C recorded; raise what a callback raised."""
        self.report_events()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def report_events(self) -> None:
        """Log what C recorded, in traffic_manager.py's words (before a callback too,
        so that the log keeps the order of what happened; the native device calls it
        when its loop says there is something)."""
        lib = self.lib
        while n := lib.p4n_tm_events(self.tm, self._events, EVENTS_BATCH):
            for ev in self._events[0:n]:
                if ev.kind == lib.P4N_TM_EV_BAD_PRIORITY:
                    reference.say_bad_priority(ev.port, ev.priority, self.priorities)
                elif ev.kind == lib.P4N_TM_EV_PAUSE_NO_RATE:
                    reference.say_pause_without_rate(ev.port)
                elif ev.kind == lib.P4N_TM_EV_STORM:
                    reference.say_storm(ev.port, ev.priority, ev.value, ev.count)
                elif ev.kind == lib.P4N_TM_EV_STORM_OVER:
                    reference.say_storm_over(ev.port, ev.priority, ev.value)

    def _check(self, result: int) -> None:
        if result == self.lib.P4N_TM_NO_MEMORY:
            raise MemoryError("native traffic manager: out of memory")


def _port(port: int) -> int:
    if not 0 <= port < 512:
        raise ValueError(f"port must be 0..511 (v1model's 9-bit port numbers), got {port}")
    return port


def _rate(rate: float | None) -> float:
    return 0.0 if rate is None else rate


def _port_pfc(s: Any) -> PortPfc:
    """A port's PFC state from C as pfc.PortPfc, whose to_json the stats use."""
    return PortPfc(list(s.ingress_bytes), [bool(x) for x in s.xoff], list(s.refresh_at),
                   list(s.pause_tx), s.headroom_drops, list(s.pause_rx), list(s.paused_until),
                   list(s.paused_since), list(s.booked_us), list(s.last_pause_rx),
                   [bool(x) for x in s.storm], s.storms, s.storm_drops)
