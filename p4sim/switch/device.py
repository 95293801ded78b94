"""The switch device: ports, pipeline engine, traffic manager and captures in one loop.

One thread runs everything that touches packets, driven by select over the ports'
non-blocking sockets, an eventfd (to be woken by other threads) and the traffic
manager's next departure time as the timeout -- so an idle switch sleeps in the kernel
and a rate-limited port is served on time without busy polling:

    wait (select) -> read a batch from each ready port -> merge them in arrival order
                 -> per frame: dequeue what fell due before it, [MAC: PAUSE frames]
                    or ingress pipeline -> enqueue -> then dequeue what is due now
                 -> egress pipeline -> transmit -> flush captures

Every frame meets the queues as they were at its kernel arrival time, whichever port it
came by and however late the loop woke (``Device._handle``): admission (tail drop,
``enq_qdepth``, ECN from the queue depth, PFC accounting) is decided by when frames
arrived, as on a wire, not by the order the loop reads its rings.

MAC control frames (EtherType 0x8808: PAUSE, PFC) are the MAC's, as on a hardware
switch: they are consumed before the pipeline (captures still show them), a PFC frame
pauses the port's queues in the traffic manager, and the PFC frames the traffic
manager decides to send leave at once, ahead of the queues (p4sim/switch/pfc.py).

Other threads (the P4Runtime server) use ``lock`` around any call into ``engine``,
``inject`` for PacketOut, and the ``set_*`` queue-control methods; the loop holds
``lock`` while it processes a batch, so a control-plane call waits at most one batch.

Time is the fabric's emulation clock (emulation/clock.py): timestamps, queue rates and
the traffic manager's schedule are in emulated microseconds, and only the wait in
select is converted to wall time. select, not epoll: epoll's timeout counts whole
milliseconds (rounded up), a third of a packet time on a 10 Mbit/s link with 4 KiB
frames, where select's counts microseconds; a switch has only a dozen descriptors. `fidelity` reports how closely departures kept to the
ideal links' schedule (emulation/fidelity.py), with the kernel's drops and the time
the input was saturated.
"""

from __future__ import annotations

import heapq
import logging
import os
import select
import threading
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable

from emulation.clock import EmulationClock
from emulation.host import cpu_ticks
from p4sim.switch.native.engine import make_engine
from p4sim.switch.pause import is_mac_control, parse_pause, pfc_frame
from p4sim.switch.pcap import PortCaptures
from p4sim.switch.pfc import PfcConfig
from p4sim.switch.ports import RING_BLOCKS, InterfacePort, close_ports, open_ports
from p4sim.switch.traffic_manager import DEFAULT_QUEUE_DEPTH, Dequeued, TrafficManager
from p4sim.switch.v1model import V1Switch

log = logging.getLogger(__name__)

# Frames read from one port per loop iteration: large enough to amortise the select
# call, small enough that other ports and the egress side are served in between.
RX_BATCH = 64
# Input saturated (every read hit RX_BATCH) for this long means the switch process
# is falling behind its ports; it is reported, at most every BACKLOG_WARN_EVERY_S.
BACKLOG_WARN_AFTER_S = 0.2
BACKLOG_WARN_EVERY_S = 5.0
# How often the kernel's per-socket drop counters are read while traffic flows.
KERNEL_DROPS_CHECK_S = 1.0
# Wake-ups at least this many packet times (of the fastest rate-limited port) apart:
# what arrives or falls due sooner waits in the rings and the queues for the rest of
# the quantum and is handled with it (interrupt moderation, as a NIC does). Each
# wake-up of a Python process costs far more than the frame it handles (a cold
# interpreter after the other processes ran); a quarter packet time keeps departures
# within the fidelity bound (one packet time) with room for the machine's own delays,
# and arrivals keep their kernel timestamps, so the queues see when frames arrived.
WAKE_QUANTUM_PACKET_TIMES = 0.25


# A received frame: (arrival in emulated us, port, frame, whether it is a MAC control
# frame). PacketOuts are never the MAC's, whatever their EtherType.
Arrival = tuple[int, int, bytes, bool]


def in_arrival_order(batches: Iterable[list[Arrival]]) -> list[Arrival]:
    """One wake-up's batches (each in its port's ring order) as one list in arrival
    order; frames of equal arrival time keep their batch's order. A switch port is a
    wire: which port a frame came by, or which ring the loop read first, must not
    decide which of two frames the queues see first."""
    return list(heapq.merge(*batches, key=lambda a: a[0]))


def pin_loop_thread(cpu: int | None) -> None:
    """Keep the calling thread (a packet loop) on core ``cpu``; None leaves it free.

    Why: a fabric's switch loops wake together on the emulated clock's grid
    (WAKE_QUANTUM_PACKET_TIMES); on one core one timer interrupt wakes them all and
    each runs on caches the previous one left warm, where spread over the cores they
    migrate and wake each other's cores (docs/fabric.md, "Native switches")."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})   # pid 0: the calling thread alone (Linux)


class Device:
    """A v1model switch on Linux interfaces (``ports``: port number -> interface name)."""

    # The traffic manager's class (the native device's is tm.c behind the same interface).
    traffic_manager: Callable[..., TrafficManager] = TrafficManager

    def __init__(self, ports: dict[int, str], *, device_id: int = 0, cpu_port: int | None = None,
                 priority_queues: int = 1, queue_depth: int = DEFAULT_QUEUE_DEPTH,
                 queue_rate_pps: float | None = None, port_rates: dict[int, float] | None = None,
                 pcap_dir: str | None = None, clock: EmulationClock | None = None,
                 pfc: PfcConfig | None = None, engine: str = "python",
                 loop_cpu: int | None = None) -> None:
        if cpu_port is not None and cpu_port in ports:
            raise ValueError(f"CPU port {cpu_port} is also given an interface ({ports[cpu_port]})")
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.engine_kind = engine   # native, python or auto (native.engine.make_engine)
        self.loop_cpu = loop_cpu    # the core the packet loop's thread runs on (None: any)
        self.emulation_clock = clock or EmulationClock.start()
        self.lock = threading.RLock()
        self.engine: V1Switch | None = None
        self.tm = self.traffic_manager(self.clock, priority_queues, queue_depth, queue_rate_pps, pfc)
        self.tm.send_pause = self._send_pause
        self.packet_in_handler: Callable[[bytes], None] | None = None
        self.packet_ins_heard = True   # runtime.dataplane.Dataplane's; the handler decides here
        self.counters = {"rx": 0, "tx": 0, "no_pipeline": 0, "pipeline_errors": 0,
                         "stale_after_reload": 0, "unknown_port": 0, "packet_in_dropped": 0,
                         "mac_control": 0}
        self._ports: dict[int, InterfacePort] = {}
        self._by_fd: dict[int, InterfacePort] = {}
        self._injected: deque[tuple[int, bytes]] = deque()
        self._stopping = False
        self._watch: _BacklogWatch | None = None
        self._wakeup = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.captures: PortCaptures | None = None
        try:
            opened = open_ports([{"number": number, "iface": iface,
                                  "ring_blocks": self.ring_blocks((port_rates or {}).get(number))}
                                 for number, iface in sorted(ports.items())])
            for number, port in zip(sorted(ports), opened):
                self._ports[number] = port
                self._by_fd[port.fileno()] = port
            for number, iface in sorted(ports.items()):
                self.tm.add_port(number)
                self.tm.set_frame_bytes(number, _frame_bytes(iface))
            for number, rate in (port_rates or {}).items():
                self.tm.set_port_rate(number, rate)
            if pcap_dir is not None:
                names = dict(ports)
                if cpu_port is not None:
                    # Unique per device: fabric switches share one pcap directory.
                    names[cpu_port] = f"cpu{device_id}"
                self.captures = PortCaptures(pcap_dir, names)
        except BaseException:
            self.close()
            raise

    def ring_blocks(self, rate_bytes_per_s: float | None) -> int:
        """Receive ring blocks of a port whose egress runs at this rate (None: unpaced):
        ports.py's RING_BLOCKS, 448 slots, ~8 ms of an unpaced sender at the Python loop's
        ~55 kpps. A faster loop needs more slots for the same ride-out time
        (`NativeDevice.ring_blocks`)."""
        return RING_BLOCKS

    def clock(self) -> int:
        """Emulated microseconds since the fabric's origin: the time base of all
        timestamps (v1model's are this, masked to their width)."""
        return self.emulation_clock.now_us()

    # ---- pipeline

    def make_engine(self, bmv2_json: dict) -> V1Switch:
        """Build (but do not install) a pipeline engine for this device from BMv2 JSON
        (the engine `engine_kind` chooses)."""
        return make_engine(bmv2_json, self.engine_kind, cpu_port=self.cpu_port,
                           device_id=self.device_id, clock=self.clock)

    def install(self, engine: V1Switch | None) -> None:
        """Make ``engine`` the running pipeline (None: no pipeline, drop everything).

        Packets still queued from the previous pipeline are dropped when they reach the
        head of their queue, as their state belongs to a program that no longer runs.
        """
        with self.lock:
            self.engine = engine
        self._wake()

    def load_pipeline(self, bmv2_json: dict) -> V1Switch:
        """Build an engine from BMv2 JSON and install it; returns the engine."""
        engine = self.make_engine(bmv2_json)
        self.install(engine)
        return engine

    # ---- calls from other threads

    def inject(self, data: bytes, port: int | None = None) -> None:
        """Queue a packet into the ingress pipeline as if received on ``port``.

        The default port is the CPU port: this is how a P4Runtime PacketOut enters.
        """
        in_port = self.cpu_port if port is None else port
        if in_port is None:
            raise ValueError("packet injection needs a CPU port (--cpu-port) or an explicit port")
        self._injected.append((in_port, bytes(data)))
        self._wake()

    def set_port_rate(self, port: int, bytes_per_s: float | None) -> None:
        """Change a port's line rate at run time (bytes/s; None for unlimited)."""
        with self.lock:
            self.tm.set_port_rate(port, bytes_per_s)
        self._wake()

    def set_queue_rate(self, port: int | None, pps: float | None) -> None:
        """Change the packets/s limit of one port's queues (all ports if None)."""
        with self.lock:
            self.tm.set_queue_rate(port, pps)
        self._wake()

    def set_queue_depth(self, port: int | None, packets: int) -> None:
        """Change the depth (packets per queue) of one port (all ports if None)."""
        with self.lock:
            self.tm.set_queue_depth(port, packets)

    def set_pfc(self, config: PfcConfig | None) -> None:
        """Change which priorities are lossless, and their thresholds (None: no PFC)."""
        with self.lock:
            self.tm.set_pfc(config)
        self._wake()

    def queue_stats(self) -> dict[int, dict[str, Any]]:
        """Per-port queue settings and counters (depth, drops, sent bytes...), each with
        ``t_us``, the emulated time they were read: a reader's rates then need no
        guess of when the switch answered."""
        with self.lock:
            stats = self.tm.stats()
            now = self.clock()
        for s in stats.values():
            s["t_us"] = now
        return stats

    def port_status(self) -> dict[int, bool]:
        """Each interface port's operational state (`InterfacePort.oper_up`): what
        the controller watches cables by (QueueControl GetPortStatus). Read from the
        kernel without the device lock: it touches no pipeline state."""
        return {number: port.oper_up() for number, port in sorted(self._ports.items())}

    def fidelity(self) -> dict[str, Any]:
        """Cumulative fidelity counters (readers difference two snapshots for a window):
        lateness of all rate-limited departures (packet times), bursts, kernel drops,
        emulated seconds with the input saturated, the shortest packet time (us), and
        the machine's CPU time with what its hypervisor stole (`emulation.host`)."""
        with self.lock:
            lateness, bursts, packet_time = self.tm.fidelity()
            return {"lateness": lateness.to_json(), "bursts": bursts,
                    "packet_time_us": packet_time or 0.0,
                    "kernel_drops": self._kernel_drops(), "saturated_s": self._saturated_s(),
                    "dilation": self.emulation_clock.dilation, "host_cpu": cpu_ticks()}

    def _kernel_drops(self) -> int:
        """Frames the kernel dropped before the ports read them, in total (under the lock)."""
        for port in self._ports.values():
            port.poll_kernel_drops()  # adds what the kernel counted since the last look
        return sum(p.kernel_drops for p in self._ports.values())

    def _saturated_s(self) -> float:
        """Emulated seconds with the input saturated, in total (under the lock)."""
        return self._watch.saturated_total() if self._watch is not None else 0.0

    def stop(self) -> None:
        """Make ``run`` return; safe from any thread and from signal handlers."""
        self._stopping = True
        self._wake()

    def _wake(self) -> None:
        try:
            os.eventfd_write(self._wakeup, 1)
        except BlockingIOError:
            pass  # counter saturated: the loop is already due to wake

    # ---- the loop

    def run(self) -> None:
        """Forward packets until ``stop`` is called."""
        fds = [self._wakeup, *self._by_fd]
        watch = self._watch = _BacklogWatch(list(self._ports.values()), self.emulation_clock)
        wall = self.emulation_clock.wall_s
        log.info("switch running: %d ports%s", len(self._ports),
                 "" if self.engine is not None else ", no pipeline loaded")
        pin_loop_thread(self.loop_cpu)
        woke = 0   # emulated us
        while not self._stopping:
            with self.lock:
                deadline = self.tm.next_deadline()
                packet_time = self.tm.packet_time_us()
            if packet_time is not None:
                self.emulation_clock.sleep((woke + WAKE_QUANTUM_PACKET_TIMES * packet_time - self.clock()) / 1e6)
            timeout = None if deadline is None else max(0.0, wall((deadline - self.clock()) / 1e6))
            ready, _, _ = select.select(fds, [], [], timeout)
            woke = self.clock()
            with self.lock:
                arrived, saturated = self._read(ready)
                self._handle(arrived)
                if self.captures is not None:
                    self.captures.flush()
                if ready:
                    watch.update(saturated)
        for port in self._ports.values():
            port.poll_kernel_drops()
        log.info("switch stopped: %s", self.summary())

    def _read(self, ready: Iterable[int]) -> tuple[list[Arrival], bool]:
        """A batch from each ready fd, merged in arrival order (`in_arrival_order`);
        True if a port had more waiting. PacketOuts injected by other threads count as
        arriving now."""
        saturated = False
        batches: list[list[Arrival]] = []
        for fd in ready:
            if fd == self._wakeup:
                try:
                    os.eventfd_read(self._wakeup)
                except BlockingIOError:
                    pass
                now = self.clock()
                injected = []
                while self._injected:
                    in_port, data = self._injected.popleft()
                    injected.append((now, in_port, data, False))
                batches.append(injected)
                continue
            port = self._by_fd[fd]
            frames, stamps, more = port.recv_batch(RX_BATCH)
            saturated |= more
            arrival_us = self.emulation_clock.us_at_monotonic_ns
            batches.append([(arrival_us(stamp), port.number, frame, is_mac_control(frame))
                            for frame, stamp in zip(frames, stamps)])
        return in_arrival_order(batches), saturated

    def _handle(self, arrived: list[Arrival]) -> None:
        """Put a wake-up's arrivals through the switch at their arrival times.

        Before each arrival the traffic manager serves only what fell due by that
        arrival's time, so the frame finds the queues (tail drop, ``enq_qdepth``, PFC
        accounting) as they were when it arrived, whichever port it came by and however
        late the loop woke; then everything due by now leaves. MAC control frames take
        their turn too: a PAUSE stops a queue from its arrival, not from the wake-up.
        """
        for arrival, in_port, frame, mac_control in arrived:
            self.tm.service(self._transmit, until=arrival)
            if mac_control:
                self._mac_control(in_port, frame, arrival)
            else:
                self._ingress(in_port, frame, arrival)
        self.tm.service(self._transmit)

    def _mac_control(self, port: int, frame: bytes, arrival: int) -> None:
        """A MAC control frame: the MAC's, never the pipeline's (module docstring); a
        PFC frame pauses the port's queues from its arrival."""
        self.counters["rx"] += 1
        self.counters["mac_control"] += 1
        if self.captures is not None:
            self.captures.received(port, frame)
        quanta = parse_pause(frame)
        if quanta is not None:
            self.tm.receive_pause(port, quanta, arrival)

    def _ingress(self, port: int, frame: bytes, arrival: int) -> None:
        self.counters["rx"] += 1
        if self.captures is not None:
            self.captures.received(port, frame)
        engine = self.engine
        if engine is None:
            self.counters["no_pipeline"] += 1
            return
        try:
            jobs = engine.run_ingress(port, frame)
        except Exception:
            # A pipeline bug must not take the switch down: the packet is lost, as
            # a hardware switch would lose it, and the failure is reported.
            self.counters["pipeline_errors"] += 1
            log.exception("ingress pipeline failed on a %d-byte packet from port %d",
                          len(frame), port)
            return
        self._enqueue(engine, jobs, arrival, port)

    def _enqueue(self, engine: V1Switch, jobs: list, arrival: int | None = None,
                 in_port: int | None = None) -> None:
        for job in jobs:
            self.tm.enqueue(job.port, job.priority, (engine, job), arrival, job.length, in_port)

    def _send_pause(self, port: int, quanta: dict[int, int]) -> None:
        """The MAC sends a PFC frame out of ``port`` (the traffic manager decided)."""
        iface = self._ports.get(port)
        if iface is None:
            return  # the CPU port has no peer to pause
        frame = pfc_frame(iface.mac, quanta)
        if iface.send(frame) and self.captures is not None:
            self.captures.sent(port, frame)

    def _transmit(self, d: Dequeued) -> int:
        engine, job = d.item
        if engine is not self.engine:
            self.counters["stale_after_reload"] += 1
            return 0
        try:
            outputs, more = engine.run_egress(job, d.enq_qdepth, d.deq_qdepth,
                                              d.enq_timestamp, d.deq_timedelta)
        except Exception:
            self.counters["pipeline_errors"] += 1
            log.exception("egress pipeline failed on a packet for port %d", d.port)
            return 0
        # Egress clones and recirculated packets queue like any other packet (as in
        # simple_switch), so they see and cause real queueing too.
        self._enqueue(engine, more)
        # Outputs leave on the job's own port (the engine's contract), so their bytes
        # are what the port's link carried.
        return sum(self._send(port, data) for port, data in outputs)

    def _send(self, port: int, data: bytes) -> int:
        """Put ``data`` on ``port``; returns the bytes sent (0 if lost)."""
        if port == self.cpu_port:
            handler = self.packet_in_handler
            if handler is None:
                self.counters["packet_in_dropped"] += 1
                return 0
            if self.captures is not None:
                self.captures.sent(port, data)
            try:
                handler(data)
            except Exception:
                self.counters["packet_in_dropped"] += 1
                log.exception("PacketIn handler failed on a %d-byte packet", len(data))
                return 0
            self.counters["tx"] += 1
            return len(data)
        iface = self._ports.get(port)
        if iface is None:
            self.counters["unknown_port"] += 1
            log.debug("dropping a packet for port %d, which has no interface", port)
            return 0
        if not iface.send(data):
            return 0
        if self.captures is not None:
            self.captures.sent(port, data)
        self.counters["tx"] += 1
        return len(data)

    def summary(self) -> str:
        """One line of counters for logs (per-port problems only where they occurred)."""
        drops = {p: st["drops"] for p, st in self.tm.stats().items() if st["drops"]}
        parts = [f"{k}={v}" for k, v in self.counters.items()] + [f"queue_drops={drops or 0}"]
        for what in ("tx_errors", "rx_truncated", "kernel_drops"):
            per_port = {p.number: getattr(p, what) for p in self._ports.values() if getattr(p, what)}
            parts.append(f"{what}={per_port or 0}")
        return ", ".join(parts)

    def close(self) -> None:
        """Release sockets (side by side: `close_ports`), captures and the wakeup fd."""
        close_ports(self._ports.values())
        self._ports.clear()
        self._by_fd.clear()
        if self.captures is not None:
            self.captures.close()
            self.captures = None
        if self._wakeup >= 0:
            os.close(self._wakeup)
            self._wakeup = -1


def _frame_bytes(iface: str) -> int:
    """The largest frame ``iface`` carries: its MTU plus Ethernet header and one tag."""
    try:
        return int(Path(f"/sys/class/net/{iface}/mtu").read_text()) + 18
    except (OSError, ValueError):
        return 1518


class _BacklogWatch:
    """Notices the switch falling behind its ports, and says so in the log.

    Two signs: every read hitting RX_BATCH for longer than BACKLOG_WARN_AFTER_S (frames
    keep piling up faster than the loop takes them), and frames the kernel dropped
    because a port's socket buffer was full. Times are emulated seconds; the saturated
    time is summed for the fidelity report.
    """

    def __init__(self, ports: list[InterfacePort], clock: EmulationClock) -> None:
        self.ports = ports
        self.clock = clock
        self.saturated_since: float | None = None
        self.saturated_s = 0.0   # closed saturated periods
        self.last_warning = -BACKLOG_WARN_EVERY_S
        self.next_drops_check = clock.now() + KERNEL_DROPS_CHECK_S

    def saturated_total(self) -> float:
        """Emulated seconds with the input saturated, the open period included."""
        open_s = 0.0 if self.saturated_since is None else self.clock.now() - self.saturated_since
        return self.saturated_s + open_s

    def update(self, saturated: bool) -> None:
        now = self.clock.now()
        if not saturated:
            if self.saturated_since is not None:
                self.saturated_s += now - self.saturated_since
            self.saturated_since = None
        elif self.saturated_since is None:
            self.saturated_since = now
        elif now - self.saturated_since > BACKLOG_WARN_AFTER_S and \
                now - self.last_warning > BACKLOG_WARN_EVERY_S:
            log.warning("input backlog: ports have had frames waiting for %.1f s; "
                        "the switch is not keeping up", now - self.saturated_since)
            self.last_warning = now
        if now >= self.next_drops_check:
            self.next_drops_check = now + KERNEL_DROPS_CHECK_S
            for port in self.ports:
                dropped = port.poll_kernel_drops()
                if dropped:
                    log.warning("input backlog: port %d (%s) lost %d frames in the kernel "
                                "(socket buffer full); the switch is not keeping up",
                                port.number, port.iface, dropped)
