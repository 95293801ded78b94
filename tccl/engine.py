"""The agent's event loop: NIC sockets, queue pairs, local (NVLink) channels, mailboxes.

One thread runs everything (one agent = one process per server): each turn drains the
NICs' receive rings, lets every NIC send what its line-rate pacer and its QPs' DCQCN
pacers allow (round robin over QPs), runs due timers, executes commands queued by
other threads (the control channel), then sleeps in ``select`` until the next thing is
due -- a departure, an NVLink delivery, a retransmission timeout, a timeline sample,
the caller's deadline -- or a frame or a command arrives; never on a polling period,
and never sooner than half a frame time after the last wake-up (`WAKE_QUANTUM_FRAMES`).
With the native NIC the NICs' part of this loop runs in C on a thread of its own.

A NIC is the switch's `InterfacePort` bound to IPv4 (`tccl.nicports`): frames are read from a
PACKET_RX_RING shared with the kernel (a memory copy per frame, no system call) and
sent on the same AF_PACKET socket. A second port bound to MAC control (EtherType
0x8808) takes the PFC PAUSE frames of the leaf: the NIC honours them, as RoCE NICs do --
frames of a paused priority (the job's RoCE data and ACKs, by their DSCP) wait until the
pause runs out (quanta x 512 bit times at the NIC's line rate) or a resume comes; CNPs,
on their own priority, still go. Each received frame is handled at
its arrival time (the kernel's timestamp), not at the time the loop got to it: ACKs
start RTOs, CNPs cut DCQCN rates and CE marks space CNPs by when they arrived.

Time is the fabric's `EmulationClock`: every reading (pacers, DCQCN, RTOs, NVLink
deliveries, the flows' timeline) is emulated seconds, and every sleep is converted to
wall time by the clock's dilation, so the agent runs at the fabric's pace.

The transport runs in one of two engines (``nic``): ``python``, the reference --
`NicPort` below and the queue pairs of `tccl.qp` -- or ``native``, the NIC in C
(`tccl.nic`): the same semantics (the tests run both and compare their frames), with
every frame read, handled, paced and sent in C, on the device's own thread; the loop
then only posts messages and reaps completions, and its Python work no longer holds
the NICs' frames.

Messages between ranks: `send(src, dst, data, on_done, via)` and a per-(dst, src,
channel) mailbox of received messages, in order. Ranks of the same server exchange
messages over an emulated NVLink channel (serialised at its bandwidth, delivered after
its latency) when the job enables one; otherwise, or when asked, over their NICs
(channel ``net``) like any other pair.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import queue
import random
import select
import socket
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from emulation.clock import EmulationClock
from p4sim.switch.pause import PRIORITIES, parse_pause, quanta_seconds
from p4sim.switch.ports import InterfacePort, close_ports
from tccl import fidelity, roce
from tccl.fidelity import Lateness
from tccl.job import Job, RankInfo, qpn, qpn_index, qpn_ranks
from tccl.nicports import open_nic_ports
from tccl.qp import Requester, Responder
from topo.hashmodel import PORT_RANGE
from topo.headers import priority_dscp
from topo.spec import NICS      # the transport engines: the reference, the NIC in C (tccl/nic)

if TYPE_CHECKING:
    from tccl.nic.device import NativeDevice, NativeNicPort

MAX_RX_BATCH = 512          # frames read per NIC per turn before sending again
MAX_TX_BATCH = 64           # frames sent per NIC per turn before reading again
# Wake-ups are at least this many frame times (an MTU frame at line rate) apart: what
# is due sooner waits for the rest of the quantum and goes out with it, so an agent
# whose NICs all send and receive wakes twice per frame time, not once per frame (a
# NIC's interrupt moderation). Half a frame time keeps every departure and every
# frame's handling within the fidelity bound of one frame time, and well inside what
# CATCHUP_FRAMES lets a NIC make up.
WAKE_QUANTUM_FRAMES = 0.5
# A NIC that woke up late may catch up by this many frame times at once: enough to keep
# the line rate through the event loop's timing jitter, well below the switches' ECN
# Kmin (5 packets), so that the sender's own bursts do not look like congestion.
CATCHUP_FRAMES = 2
NET, NVLINK = "net", "nvlink"  # the two channels between ranks


class NicPort:
    """One rank's NIC: its interface port, the line-rate pacer shared by its QPs, the
    PFC pause state per priority, and how late its departures and its frames' handling
    were (`tccl.fidelity`). Its QPs send on ``priority``."""

    def __init__(self, info: RankInfo, port: InterfacePort, mac_control: InterfacePort, line_rate_bps: float,
                 frame_time: float, priority: int) -> None:
        self.info = info
        self.line_rate = line_rate_bps
        self.priority = priority
        self.port, self.mac_control = port, mac_control     # `tccl.nicports`
        self.paused_until = [float("-inf")] * PRIORITIES   # emulated s
        self.pause_rx = 0
        self.paused_s = 0.0          # paused time of the QPs' priority, up to paused_until
        self.held: deque[bytes] = deque()   # responder frames waiting out a pause
        self.ip_bytes = socket.inet_aton(info.ip)
        self.requesters: list[Requester] = []
        self._rr = 0
        self.next_tx = 0.0
        self._free_at = float("-inf")   # previous departure + its serialisation time
        self.tx_lateness = Lateness(frame_time)
        self.rx_lateness = Lateness(frame_time)

    def add_qp(self, qp: "QueuePair") -> None:
        """Serve ``qp`` on this NIC (its requester joins the round robin)."""
        self.requesters.append(qp.requester)

    def transmit(self, frame: bytes) -> None:
        """Put one frame on the wire. A full socket buffer or a link that is down (a
        failed link in an experiment) drops it, as a NIC would (counted in the port's
        ``tx_errors``); go-back-N recovers."""
        self.port.send(frame)

    def send(self, frame: bytes, now: float) -> None:
        """Transmit a responder frame (ACK, NAK, CNP) now, or hold it while its priority
        (its DSCP's) is paused."""
        if self.held or self.paused_until[roce.priority(frame)] > now:
            self.held.append(frame)
        else:
            self.transmit(frame)

    def receive_pause(self, arrival: Callable[[int], float]) -> int:
        """Honour the PAUSE frames waiting, each from its arrival (``arrival`` turns a
        kernel timestamp into emulated seconds); returns how many frames were read."""
        frames, stamps, _ = self.mac_control.recv_batch(MAX_RX_BATCH)
        for frame, stamp in zip(frames, stamps):
            quanta = parse_pause(frame)
            if quanta is None:
                continue
            at = arrival(stamp)
            self.pause_rx += 1
            for priority, q in quanta.items():
                until = at + quanta_seconds(q, self.line_rate)
                if priority == self.priority:
                    # Paused time is booked up to the pause's end; a resume or a
                    # refresh replaces the part not yet lived.
                    self.paused_s += until - at - max(0.0, self.paused_until[priority] - at)
                self.paused_until[priority] = until
        return len(frames)

    def paused_seconds(self, now: float) -> float:
        """Time the QPs' priority has been paused, up to ``now``."""
        return self.paused_s - max(0.0, self.paused_until[self.priority] - now)

    @property
    def tx_dropped(self) -> int:
        return self.port.tx_errors

    def pump(self, now: float) -> int:
        """Send the frames the pacers allow at ``now``, round robin over the QPs (none
        while their priority is paused); held responder frames go first."""
        paused_until = self.paused_until
        while self.held and paused_until[roce.priority(self.held[0])] <= now:
            self.transmit(self.held.popleft())
        if paused_until[self.priority] > now:
            return 0
        sent = 0
        n = len(self.requesters)
        while sent < MAX_TX_BATCH and self.next_tx <= now and n:
            for k in range(n):
                req = self.requesters[(self._rr + k) % n]
                sendable = req.sendable_at()
                frame = req.next_frame(now) if sendable is not None else None
                if frame is not None:
                    self._rr = (self._rr + k + 1) % n
                    self.transmit(frame)
                    self.tx_lateness.add(now - max(self._free_at, sendable, self.paused_until[self.priority]))
                    gap = len(frame) * 8 / self.line_rate
                    self._free_at = now + gap
                    self.next_tx = max(self.next_tx, now - CATCHUP_FRAMES * gap) + gap
                    sent += 1
                    break
            else:
                break
        return sent

    def ready_at(self) -> float | None:
        times = [t for t in (r.ready_at() for r in self.requesters) if t is not None]
        due = max(self.next_tx, min(times), self.paused_until[self.priority]) if times else None
        if self.held:
            resume = self.paused_until[roce.priority(self.held[0])]
            due = resume if due is None else min(due, resume)
        return due


class QueuePair:
    """Rank ``local``'s RC queue pair ``index`` to rank ``peer``: requester + responder."""

    def __init__(self, engine: "Engine", local: RankInfo, peer: RankInfo, sport: int, now: float,
                 index: int = 0) -> None:
        self.local, self.peer, self.index = local, peer, index
        self.qpn = qpn(local.rank, peer.rank, index)
        # Wall clock at creation: QP numbers repeat from job to job, this tells a
        # controller a new job's QP from the old one it saw. An identity stamp, not a
        # time anything is measured with: it must differ between jobs on different
        # fabrics (clocks with other origins) and after a restart, which emulated time
        # does not guarantee.
        self.created_ns = time.time_ns()
        remote_qpn = qpn(peer.rank, local.rank, index)
        src = roce.Endpoint(local.mac, local.ip)
        dst = roce.Endpoint(local.gateway_mac, peer.ip)
        t = engine.job.transport

        dscp = priority_dscp(t.priority)

        def make(port: int) -> roce.FrameTemplate:
            return roce.FrameTemplate(src, dst, port, remote_qpn, dscp=dscp)

        self.requester = engine.Requester(self.qpn, make(sport), engine.dcqcn, now, mtu=t.mtu,
                                          window=t.window, rto=t.rto, make_template=make)
        # ACKs and CNPs keep the QP's first source port: they are small and their path
        # does not matter for load balance.
        self.responder = engine.Responder(
            self.qpn, roce.FrameTemplate(src, dst, sport, remote_qpn, dscp=dscp, ecn=roce.ECN_NOT_ECT),
            roce.FrameTemplate(src, dst, sport, remote_qpn, dscp=roce.CNP_DSCP, ecn=roce.ECN_NOT_ECT),
            engine.dcqcn.cnp_interval, lambda data: engine.deliver(local.rank, peer.rank, data, NET, index))

    def describe(self) -> dict[str, Any]:
        """The flow as the control channel lists it."""
        r = self.requester
        state = "idle" if r.idle else ("moving" if r.port_change else "active")
        return {"qpn": self.qpn, "local_rank": self.local.rank, "peer_rank": self.peer.rank,
                "qp_index": self.index, "created_ns": self.created_ns,
                "src_ip": self.local.ip, "dst_ip": self.peer.ip, "sport": r.sport,
                "dport": roce.ROCE_UDP_PORT, "bytes": r.stats.bytes, "packets": r.stats.packets,
                "rate_bps": r.rate.rc, "state": state, "retransmits": r.stats.retransmits,
                "naks": r.stats.naks, "timeouts": r.stats.timeouts, "acked_bytes": r.stats.acked_bytes,
                "cnps": r.stats.cnps, "ce_marked_rx": self.responder.stats.ce_marked}


@dataclass(order=True)
class _LocalDelivery:
    due: float
    seq: int
    dst: int
    src: int
    data: bytes
    on_done: Callable[[], None] | None


class Engine:
    """Everything one agent runs: its ranks' NICs and QPs and the NVLink channels, on
    the transport engine ``nic`` (`NICS`)."""

    def __init__(self, job: Job, server: str, ports: Callable[..., int] | None = None,
                 clock: EmulationClock | None = None, nic: str = "python") -> None:
        if nic not in NICS:
            raise ValueError(f"nic: one of {', '.join(NICS)}, got {nic!r}")
        self.job = job
        # The fabric's clock (default: ASTRAL_CLOCK, else a fresh one); `clock()` reads
        # emulated seconds.
        self.emulation_clock = clock if clock is not None else EmulationClock.from_env()
        self.clock = self.emulation_clock.now
        self.dcqcn = job.transport.dcqcn()
        self.ranks = {r.rank: r for r in job.ranks}
        self.local = {r.rank: r for r in job.server_ranks(server)}
        self.server = server
        rng = random.Random(f"{job.transport.seed}-{server}")
        # ports(local, peer[, index]): the index is passed only for index > 0, so a plain
        # two-argument function serves single-QP jobs.
        self._ports = ports or (lambda *_: rng.randint(*PORT_RANGE))
        self.nics: dict[int, NicPort | NativeNicPort] = {}
        self._sink: socket.socket | None = None
        self.qps: dict[int, QueuePair] = {}
        self.mailbox: dict[tuple[int, int, str, int], deque[bytes]] = {}
        # With several QPs per connection, messages go round robin over them; these
        # count messages per (src, dst) sent and per (dst, src) taken, so the receiver
        # takes them back in the order they were sent.
        self._sent_count: dict[tuple[int, int], int] = {}
        self._taken_count: dict[tuple[int, int], int] = {}
        self._local_q: list[_LocalDelivery] = []
        self._local_busy: dict[tuple[int, int], float] = {}
        self._seq = itertools.count()
        self.commands: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        # What the loop sleeps on: the NICs and the command pipe. select, because its
        # timeout has microsecond resolution (epoll's and poll's are milliseconds, more
        # than a frame time at the fabric's line rates).
        self._fds = [self._wake_r]
        self.rx_frames = 0
        self.rx_ignored = 0
        self.turns = 0              # loop iterations: one wake-up each
        self._readable: set[int] = set()
        # When the next thing is due (emulated; None: nothing), as the last turn left
        # it, and whether a message was posted since (then the next turn does not sleep).
        self._due: float | None = None
        self._posted = True
        # The time an MTU frame takes at line rate: the unit of pacing and lateness.
        self._frame_time = (job.transport.mtu + roce.HDR_LEN + roce.ICRC_LEN) * 8 / job.transport.line_rate_bps
        self._quantum = WAKE_QUANTUM_FRAMES * self._frame_time
        self._woke = float("-inf")
        self.started = self.clock()
        self._next_sample = self.started
        # The native NIC's device (None: the Python transport), and the QP classes.
        self.device: NativeDevice | None = None
        self.Requester: Callable[..., Any] = Requester
        self.Responder: Callable[..., Any] = Responder
        if nic == "native":
            from tccl.nic.device import NativeDevice
            self.device = NativeDevice(self, self.emulation_clock, self._frame_time, MAX_RX_BATCH,
                                       MAX_TX_BATCH, CATCHUP_FRAMES)
            self.Requester, self.Responder = self.device.Requester, self.device.Responder
        # QPN -> [(t, acked bytes, rate bit/s, retransmits, CNPs)], for sending QPs.
        self.timeline: dict[int, list[tuple[float, int, float, int, int]]] = {}

    # --- lifetime -----------------------------------------------------------------------

    def open(self) -> "Engine":
        """Open the NICs (needs CAP_NET_RAW in the server's namespace; `PortError` if
        one cannot be opened)."""
        t = self.job.transport
        ports = open_nic_ports(self.local.values())
        try:
            for rank, info in self.local.items():
                nic: NicPort | NativeNicPort
                if self.device is not None:
                    nic = self.device.add_port(info, *ports[rank], t.line_rate_bps, t.priority)
                else:
                    nic = NicPort(info, *ports[rank], t.line_rate_bps, self._frame_time, t.priority)
                self.nics[rank] = nic
                self._fds += [nic.port.fileno(), nic.mac_control.fileno()]
        except BaseException:
            rest = [port for rank, pair in ports.items() if rank not in self.nics for port in pair]
            self.close()
            close_ports(rest)
            raise
        if self.device is not None:
            self.device.start(self._quantum)
        # The kernel would answer every RoCE frame with ICMP port unreachable; a bound UDP
        # socket that is never read swallows them (its buffer fills, the rest are dropped).
        self._sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self._sink.bind(("0.0.0.0", roce.ROCE_UDP_PORT))
        return self

    def close(self) -> None:
        self._fds = [self._wake_r]
        if self.device is not None:
            self.device.close()         # its NICs' ports with it
        else:
            close_ports(port for nic in self.nics.values() for port in (nic.port, nic.mac_control))
        self.nics.clear()
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "Engine":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- messages ---------------------------------------------------------------------

    def path(self, src: int, dst: int) -> str:
        """The channel ``src`` -> ``dst`` takes by default: ``nvlink`` between ranks of
        this server when the job has NVLink, ``net`` (the NICs and the fabric) otherwise."""
        local = self.job.transport.nvlink_gbps > 0 and src in self.local and dst in self.local
        return NVLINK if local else NET

    def qp(self, local: int, peer: int, index: int = 0) -> QueuePair:
        """QP ``index`` of local rank ``local`` towards ``peer``, created on first use."""
        n = qpn(local, peer, index)
        qp = self.qps.get(n)
        if qp is None:
            if local not in self.local or peer not in self.ranks or not 0 <= index < self.job.transport.qps:
                raise KeyError(f"no QP {local}->{peer} #{index} on server {self.server}")
            sport = self._ports(local, peer, index) if index else self._ports(local, peer)
            qp = QueuePair(self, self.local[local], self.ranks[peer], sport, self.clock(), index)
            self.qps[n] = qp
            self.nics[local].add_qp(qp)
        return qp

    def send(self, src: int, dst: int, data: bytes | bytearray | memoryview,
             on_done: Callable[[], None] | None = None, via: str | None = None) -> None:
        """Send one message from local rank ``src`` to rank ``dst`` over channel ``via``
        (default: `path`). Ranks of one server may also talk over ``net`` -- their NICs
        and the fabric -- e.g. to add the NICs' bandwidth to NVLink's."""
        via = via or self.path(src, dst)
        self._posted = True
        if via == NVLINK:
            t = self.job.transport
            if self.path(src, dst) != NVLINK:
                raise ValueError(f"no NVLink between ranks {src} and {dst} on server {self.server}")
            now = self.clock()
            start = max(now, self._local_busy.get((src, dst), now))
            finish = start + len(data) * 8 / (t.nvlink_gbps * 1e9)
            self._local_busy[(src, dst)] = finish
            heapq.heappush(self._local_q, _LocalDelivery(finish + t.nvlink_latency_us * 1e-6,
                                                         next(self._seq), dst, src, bytes(data), on_done))
        elif via == NET:
            count = self._sent_count.get((src, dst), 0)
            self._sent_count[(src, dst)] = count + 1
            self.qp(src, dst, count % self.job.transport.qps).requester.post(data, on_done, self.clock())
        else:
            raise ValueError(f"unknown channel {via!r} ({NET}, {NVLINK})")

    def deliver(self, dst: int, src: int, data: bytes, via: str = NET, index: int = 0) -> None:
        self.mailbox.setdefault((dst, src, via, index), deque()).append(data)

    def take(self, dst: int, src: int, via: str | None = None) -> bytes | None:
        """The next message for local rank ``dst`` from ``src`` on channel ``via``
        (default: `path`), if one has arrived. Each channel keeps its own order."""
        via = via or self.path(src, dst)
        index = 0
        if via == NET:
            index = self._taken_count.get((dst, src), 0) % self.job.transport.qps
        box = self.mailbox.get((dst, src, via, index))
        if not box:
            return None
        if via == NET:
            self._taken_count[(dst, src)] = self._taken_count.get((dst, src), 0) + 1
        return box.popleft()

    def call(self, fn: Callable[[], Any]) -> Future:
        """Run ``fn`` on the engine thread (from any thread); the future holds its result."""
        fut: Future = Future()
        self.commands.put((fn, fut))
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        return fut

    # --- the loop ---------------------------------------------------------------------

    def _receive(self, nic: NicPort) -> None:
        frames, stamps, _ = nic.port.recv_batch(MAX_RX_BATCH)
        self.rx_frames += len(frames)
        arrival = self.emulation_clock.from_monotonic_ns
        now, handled = self.clock(), nic.rx_lateness.add
        for frame, stamp in zip(frames, stamps):
            at = arrival(stamp)
            handled(now - at)
            pkt = roce.parse(frame)
            if pkt is None or pkt.dst_ip != nic.ip_bytes:
                self.rx_ignored += 1
                continue
            ranks = qpn_ranks(pkt.dqpn)
            index = qpn_index(pkt.dqpn)
            if ranks is None or ranks[0] != nic.info.rank or ranks[1] not in self.ranks \
                    or index >= self.job.transport.qps:
                self.rx_ignored += 1
                continue
            qp = self.qp(*ranks, index)
            if pkt.opcode == roce.ACKNOWLEDGE:
                qp.requester.on_ack(pkt.psn, pkt.syndrome & 0xE0 == roce.AETH_NAK_SEQ, at)
            elif pkt.opcode == roce.CNP:
                qp.requester.on_cnp(at)
            else:
                for out in qp.responder.on_frame(pkt, frame, at):
                    nic.send(out, now)

    def _run_commands(self) -> None:
        while not self.commands.empty():
            try:
                fn, fut = self.commands.get_nowait()
            except queue.Empty:
                return
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except Exception as e:      # handed to the calling thread
                fut.set_exception(e)

    def turn(self, until: float | None = None) -> None:
        """One iteration of the loop: sleep until the next thing is due, a frame or a
        command arrives, or (emulated) time ``until``, if given -- not at all if a
        message was posted since the last turn -- then handle what is there.

        The sleep comes first so that the caller looks at the results of a turn (a
        message delivered, a send completed) before the loop sleeps again. With the
        native NIC the NICs run in C meanwhile (`_native_turn`)."""
        if self.device is not None:
            self._native_turn(until)
            return
        if self._posted:
            self._posted = False
        else:
            limits = [t for t in (self._due, until) if t is not None]
            self._sleep(min(limits) if limits else None)
        self.turns += 1
        now = self._woke = self.clock()
        for nic in self.nics.values():
            if nic.mac_control.ready() or nic.mac_control.fileno() in self._readable:
                nic.receive_pause(self.emulation_clock.from_monotonic_ns)
            if nic.port.ready() or nic.port.fileno() in self._readable:
                self._receive(nic)
        self._readable.clear()
        self._deliver_local(now)
        self._run_commands()
        now = self.clock()
        # Timeouts first, as the native NIC's service: a go-back leaves in this turn's
        # pump (fired after it, its frames waited for the next wake-up).
        for qp in self.qps.values():
            qp.requester.check_timeout(now)
        wake = []
        for nic in self.nics.values():
            nic.pump(now)
            t = nic.ready_at()
            if t is not None:
                wake.append(t)
        for qp in self.qps.values():
            t = qp.requester.check_timeout(now)
            if t is not None:
                wake.append(t)
        self._due = min(wake + self._library_due(now), default=None)

    def _native_turn(self, until: float | None) -> None:
        """`turn` with the native NIC, whose thread receives, sends and times out
        meanwhile: sleep until it has completions, a command comes, or the library's
        next due time (``until``, an NVLink delivery, a timeline sample) -- not at all
        if a message was posted since the last turn -- then the library's part."""
        assert self.device is not None
        limits = self._library_due(self.clock()) + ([until] if until is not None else [])
        timeout: float | None = 0.0
        if not self._posted:
            due = min(limits, default=math.inf)
            timeout = None if math.isinf(due) else max(0.0, self.emulation_clock.wall_s(due - self.clock()))
        self._posted = False
        if self.device.wait(timeout, self._wake_r):
            try:
                os.read(self._wake_r, 4096)
            except BlockingIOError:
                pass
        self.turns = self.device.wakeups
        now = self.clock()
        self._deliver_local(now)
        self._run_commands()
        self._library_due(self.clock())

    def _deliver_local(self, now: float) -> None:
        """Deliver the NVLink messages due by ``now``."""
        while self._local_q and self._local_q[0].due <= now:
            d = heapq.heappop(self._local_q)
            self.deliver(d.dst, d.src, d.data, NVLINK)
            if d.on_done is not None:
                d.on_done()

    def _library_due(self, now: float) -> list[float]:
        """Take the flows' timeline sample if due; when the library's own things are
        due next (the next sample, the next NVLink delivery)."""
        wake = []
        if self.qps:
            if now >= self._next_sample:
                self._sample(now)
            wake.append(self._next_sample)
        if self._local_q:
            wake.append(self._local_q[0].due)
        return wake

    def _sleep(self, until: float | None) -> None:
        """Wait until emulated time ``until`` (None: no limit), a frame or a command
        arrives. Something due within a quantum of the last wake-up waits for the end
        of the quantum, and meanwhile only a command wakes the loop: frames wait in
        the rings, with their arrival times."""
        quantum_end = self._woke + self._quantum
        fds = self._fds
        timeout = None
        if until is not None:
            if until <= quantum_end:
                until, fds = quantum_end, self._fds[:1]
            timeout = self.emulation_clock.wall_s(until - self.clock())
            if timeout <= 0:
                return
        for fd in select.select(fds, [], [], timeout)[0]:
            if fd == self._wake_r:
                try:
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
            else:
                # A NIC reported readable with an empty ring has an error to clear (a
                # link that went down): the next turn reads it even so.
                self._readable.add(fd)

    def _sample(self, now: float) -> None:
        self._next_sample = now + self.job.transport.timeline_s
        for n, qp in self.qps.items():
            st = qp.requester.stats
            if st.packets:
                qp.requester.rate.advance(now)
                self.timeline.setdefault(n, []).append(
                    (round(now - self.started, 4), st.acked_bytes, qp.requester.rate.rc,
                     st.retransmits, st.cnps))

    def run_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Turn the loop until ``done()`` or ``timeout`` (emulated) seconds; returns
        ``done()``."""
        end = self.clock() + timeout
        while not done():
            if self.clock() >= end:
                return False
            self.turn(until=end)
        return True

    def run_for(self, seconds: float) -> None:
        """Turn the loop for ``seconds`` of emulated time (e.g. a compute step)."""
        self.run_until(lambda: False, seconds)

    def fidelity(self) -> dict[str, Any]:
        """How faithfully this agent kept emulated time (`tccl.fidelity.report`), per
        rank's NIC and overall, with the clock's dilation and the loop's wake-ups."""
        nics = {}
        for rank, nic in self.nics.items():
            nic.port.poll_kernel_drops()
            nics[str(rank)] = (nic.tx_lateness, nic.rx_lateness, nic.port.kernel_drops)
        return {**fidelity.report(nics, self._frame_time), "dilation": self.emulation_clock.dilation,
                "wakeups": self.turns}

    def pfc(self) -> dict[str, dict[str, float]]:
        """Per rank's NIC: PAUSE frames received and seconds its QPs' priority was paused."""
        now = self.clock()
        return {str(rank): {"pause_rx": nic.pause_rx, "paused_s": round(nic.paused_seconds(now), 6)}
                for rank, nic in self.nics.items()}

    def idle(self) -> bool:
        """No message waiting to be sent or acknowledged anywhere."""
        return not self._local_q and all(qp.requester.idle for qp in self.qps.values())
