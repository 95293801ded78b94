"""Reliable Connected queue pairs: the requester (sender) and responder (receiver) halves.

Pure protocol logic with the time passed in and frames returned, no sockets, so that
the loss-recovery paths are unit-testable with a deterministic lossy wire:

* `Requester` cuts messages into MTU packets (SEND FIRST/MIDDLE/LAST or ONLY), keeps
  at most ``window`` packets unacknowledged, paces them at its DCQCN rate, and goes
  back to the oldest unacknowledged PSN on a NAK or when no ACK arrives for ``rto``
  (go-back-N: the responder accepts only in-order packets, so nothing is lost or
  reordered). A source-port change waits for a message boundary with nothing in flight,
  so the flow moves to its new path without any packet overtaking another.
* `Responder` accepts the expected PSN only, checks the ICRC, reassembles messages,
  acknowledges packets that ask for it, NAKs the first out-of-sequence packet of a gap,
  and answers CE-marked packets with at most one CNP per ``cnp_interval``.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from tccl import roce
from tccl.dcqcn import DcqcnParams, DcqcnRate

# Ask for an ACK at least every this many packets (and on every message's last packet):
# frequent enough that the window never stalls waiting for one, rare enough that the
# reverse path carries ~6% of the forward packet count.
ACK_EVERY = 16


@dataclass
class _Message:
    data: memoryview
    on_done: Callable[[], None] | None
    offset: int = 0


@dataclass(frozen=True)
class _Segment:
    psn: int
    opcode: int
    message: _Message
    start: int
    end: int


@dataclass
class PortChange:
    """A pending source-port change; ``done`` is set once the flow uses ``port``, right
    after ``on_applied`` ran on the engine thread at that boundary (the control channel
    takes its answer there, so that answering needs no further turn of the loop)."""

    port: int
    done: threading.Event = field(default_factory=threading.Event)
    old_port: int = 0
    on_applied: Callable[[], None] | None = None

    def applied(self) -> None:
        """The flow uses ``port`` now (called by its requester, on the engine thread)."""
        if self.on_applied is not None:
            self.on_applied()
        self.done.set()


@dataclass
class RequesterStats:
    packets: int = 0
    bytes: int = 0
    retransmits: int = 0
    naks: int = 0
    timeouts: int = 0
    cnps: int = 0
    messages_done: int = 0
    acked_bytes: int = 0        # payload bytes acknowledged: the flow's goodput


class Requester:
    """The sending half of a queue pair towards one remote QP."""

    def __init__(self, qpn: int, template: roce.FrameTemplate, params: DcqcnParams, now: float,
                 mtu: int = 1024, window: int = 64, rto: float = 0.2,
                 make_template: Callable[[int], roce.FrameTemplate] | None = None) -> None:
        if mtu < 1 or window < 1 or rto <= 0:
            raise ValueError(f"mtu, window and rto must be positive, got {mtu}, {window}, {rto}")
        self.qpn = qpn
        self.template = template
        self.mtu, self.window, self.rto = mtu, window, rto
        self.rate = DcqcnRate(params, now)
        self.stats = RequesterStats()
        self._make_template = make_template
        self._queue: deque[_Message] = deque()
        self._inflight: deque[_Segment] = deque()   # PSNs una .. una+len-1, sent at least once
        self._resend = 0                            # index into _inflight of the next to resend
        self.una = 0                                # oldest unacknowledged PSN
        self.nxt = 0                                # PSN of the next new segment
        self._since_ack_req = 0
        self._next_tx = now
        self._last_progress = now
        # When the requester last got work after having none (a post, an ACK opening
        # the window, a NAK, a timeout): no frame could leave before that.
        self._unblocked_at = now
        self.port_change: PortChange | None = None

    # --- posting and state --------------------------------------------------------

    def post(self, data: bytes | bytearray | memoryview, on_done: Callable[[], None] | None = None,
             now: float | None = None) -> None:
        """Queue one message; ``on_done`` runs when its last packet is acknowledged.
        ``now``, if given, is when it was posted (see `sendable_at`)."""
        if len(data) == 0:
            raise ValueError("a message carries at least one byte")
        had_work = self._has_work()
        self._queue.append(_Message(memoryview(data).cast("B"), on_done))
        if now is not None:
            self._unblocked(had_work, now)

    def _unblocked(self, had_work: bool, at: float) -> None:
        """Note ``at`` as the time sending became possible, if it just did."""
        if not had_work and self._has_work():
            self._unblocked_at = at

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing in flight."""
        return not self._queue and not self._inflight

    @property
    def sport(self) -> int:
        return self.template.sport

    def request_port(self, port: int, on_applied: Callable[[], None] | None = None) -> PortChange:
        """Switch to UDP source ``port`` at the next message boundary with nothing in
        flight; ``on_applied`` runs then (`PortChange.applied`)."""
        if not 1024 <= port <= 65535:
            raise ValueError(f"UDP source port must be 1024..65535, got {port}")
        if self._make_template is None:
            raise ValueError(f"QP {self.qpn:#x} cannot change its source port (no template factory)")
        change = PortChange(port, old_port=self.sport, on_applied=on_applied)
        self.port_change = change
        self._apply_port_change_if_drained()
        return change

    def _apply_port_change_if_drained(self) -> None:
        """Apply a pending change when at a message boundary with nothing in flight."""
        if self.port_change is not None and not self._inflight and \
                (not self._queue or self._queue[0].offset == 0):
            self._apply_port_change()

    # --- sending ----------------------------------------------------------------------

    def _has_work(self) -> bool:
        if self._resend < len(self._inflight):
            return True
        if not self._queue or len(self._inflight) >= self.window:
            return False
        if self.port_change is not None and self._queue[0].offset == 0:
            return not self._inflight             # boundary: wait until drained
        return True

    def ready_at(self) -> float | None:
        """When the next packet may leave (None: nothing can be sent now)."""
        return self._next_tx if self._has_work() else None

    def sendable_at(self) -> float | None:
        """When the next packet became sendable: its pacer's time, or the event that
        gave the requester work (a post, an ACK, a timeout), whichever came later --
        its schedule, as far as this QP is concerned (None: nothing to send)."""
        return max(self._next_tx, self._unblocked_at) if self._has_work() else None

    def next_frame(self, now: float) -> bytes | None:
        """The next frame to put on the wire if the pacer allows it at ``now``."""
        if now < self._next_tx or not self._has_work():
            return None
        if self._resend < len(self._inflight):
            seg = self._inflight[self._resend]
            self._resend += 1
            self.stats.retransmits += 1
        else:
            seg = self._new_segment()
        last = seg.opcode in roce.LAST_OPCODES
        self._since_ack_req += 1
        # Also ask when half a window has gone out unasked, so the window never stalls.
        ackreq = last or self._since_ack_req >= min(ACK_EVERY, max(1, self.window // 2))
        if ackreq:
            self._since_ack_req = 0
        frame = self.template.frame(seg.opcode, seg.psn, seg.message.data[seg.start:seg.end], ackreq)
        self.stats.packets += 1
        self.stats.bytes += len(frame)
        self.rate.on_sent(len(frame), now)
        gap = len(frame) * 8 / self.rate.rc
        # Pace from the later of "now" and the schedule: at most one frame time of credit
        # after a late wake-up, none for idle time.
        self._next_tx = max(self._next_tx, now - gap) + gap
        if len(self._inflight) == 1 and self._resend == 1:
            self._last_progress = now       # the first packet of an empty window: start the RTO
        return frame

    def _new_segment(self) -> _Segment:
        msg = self._queue[0]
        if msg.offset == 0 and self.port_change is not None:
            self._apply_port_change()
        start = msg.offset
        end = min(start + self.mtu, len(msg.data))
        first, last = start == 0, end == len(msg.data)
        opcode = (roce.SEND_ONLY if last else roce.SEND_FIRST) if first else \
            (roce.SEND_LAST if last else roce.SEND_MIDDLE)
        msg.offset = end
        if last:
            self._queue.popleft()
        seg = _Segment(self.nxt, opcode, msg, start, end)
        self.nxt = (self.nxt + 1) & roce.PSN_MASK
        self._inflight.append(seg)
        self._resend = len(self._inflight)
        return seg

    def _apply_port_change(self) -> None:
        change = self.port_change
        assert change is not None and self._make_template is not None
        self.template = self._make_template(change.port)
        self.port_change = None
        change.applied()

    # --- feedback ---------------------------------------------------------------------

    def on_ack(self, psn: int, nak: bool, now: float) -> None:
        """An ACK covers every PSN up to ``psn``; a NAK says ``psn`` is expected next."""
        had_work = self._has_work()
        self._on_ack(psn, nak, now)
        self._unblocked(had_work, now)

    def _on_ack(self, psn: int, nak: bool, now: float) -> None:
        acked = roce.psn_diff(psn, self.una) + (0 if nak else 1)
        if 0 < acked <= len(self._inflight):
            for _ in range(acked):
                seg = self._inflight.popleft()
                self.stats.acked_bytes += seg.end - seg.start
                if seg.opcode in roce.LAST_OPCODES:
                    self.stats.messages_done += 1
                    if seg.message.on_done is not None:
                        seg.message.on_done()
            self.una = (self.una + acked) & roce.PSN_MASK
            self._resend = max(0, self._resend - acked)
            self._last_progress = now
            self._apply_port_change_if_drained()
        if nak and self._inflight and psn == self.una:
            self.stats.naks += 1
            self._resend = 0
            self._last_progress = now

    def on_cnp(self, now: float) -> None:
        self.stats.cnps += 1
        self.rate.on_cnp(now)

    def check_timeout(self, now: float) -> float | None:
        """Go back to the oldest unacknowledged PSN if nothing was acknowledged for rto.
        Returns when the timeout fires next if nothing changes (None: nothing in flight),
        so an event loop can sleep until then."""
        if not self._inflight:
            return None
        if now - self._last_progress > self.rto:
            had_work = self._has_work()
            self.stats.timeouts += 1
            self._resend = 0
            self._unblocked(had_work, self._last_progress + self.rto)   # when it fired
            self._last_progress = now
        return self._last_progress + self.rto


@dataclass
class ResponderStats:
    packets: int = 0
    bytes: int = 0
    out_of_order: int = 0
    duplicates: int = 0
    bad_icrc: int = 0
    ce_marked: int = 0
    cnps_sent: int = 0
    min_cnp_gap: float = 0.0      # shortest time between two CNPs sent (0: fewer than two)
    messages: int = 0


class Responder:
    """The receiving half of a queue pair: in-order delivery, ACK/NAK, CNP."""

    def __init__(self, qpn: int, template: roce.FrameTemplate, cnp_template: roce.FrameTemplate,
                 cnp_interval: float, on_message: Callable[[bytes], None]) -> None:
        self.qpn = qpn
        self.template = template
        self.cnp_template = cnp_template
        self.cnp_interval = cnp_interval
        self.on_message = on_message
        self.epsn = 0
        self.msn = 0
        self.stats = ResponderStats()
        self._parts: list[bytes] = []
        self._nak_sent = False
        self._last_cnp = float("-inf")
        self.last_sport = 0

    def on_frame(self, pkt: roce.Parsed, frame: bytes, now: float) -> list[bytes]:
        """Handle one data frame; returns the frames to send back (ACK, NAK, CNP)."""
        out: list[bytes] = []
        if not roce.icrc_ok(frame):
            self.stats.bad_icrc += 1
            return out
        if pkt.ecn == roce.ECN_CE:
            self.stats.ce_marked += 1
            gap = now - self._last_cnp
            if gap >= self.cnp_interval:
                if self.stats.cnps_sent:
                    self.stats.min_cnp_gap = min(self.stats.min_cnp_gap or gap, gap)
                self._last_cnp = now
                self.stats.cnps_sent += 1
                out.append(self.cnp_template.cnp())
        d = roce.psn_diff(pkt.psn, self.epsn)
        if d < 0:
            self.stats.duplicates += 1
            out.append(self.template.ack((self.epsn - 1) & roce.PSN_MASK, self.msn))
            return out
        if d > 0:
            self.stats.out_of_order += 1
            if not self._nak_sent:
                self._nak_sent = True
                out.append(self.template.ack(self.epsn, self.msn, nak=True))
            return out
        self._nak_sent = False
        self.last_sport = pkt.sport
        if pkt.opcode in roce.FIRST_OPCODES:
            self._parts = []
        self._parts.append(frame[pkt.payload_off:pkt.payload_end])
        self.stats.packets += 1
        self.stats.bytes += len(frame)
        self.epsn = (self.epsn + 1) & roce.PSN_MASK
        if pkt.opcode in roce.LAST_OPCODES:
            self.msn = (self.msn + 1) & roce.PSN_MASK
            self.stats.messages += 1
            data = b"".join(self._parts)
            self._parts = []
            self.on_message(data)
        if pkt.ackreq:
            out.append(self.template.ack(pkt.psn, self.msn))
        return out
