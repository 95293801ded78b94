"""The native queue pairs and DCQCN with the Python ones' API (`tccl.qp`, `tccl.dcqcn`).

`Requester`, `Responder` and `DcqcnRate` here are thin handles on the C state machines
(requester.c, responder.c, dcqcn.c): the same constructor arguments, methods and
statistics as the Python classes, so the unit tests of tccl/qp.py and dcqcn.py run on
both engines and a differential test can feed both the same wire. Frames' headers
still come from `roce.FrameTemplate` (built once per QP with Scapy): C gets their bytes
and patches lengths, checksums, opcode, PSN and ICRC per packet, as the template does.

What the C side tells the library -- a message acknowledged, a message received, a
port change applied -- comes back as completions (verbs' completion queue), reaped
after each call and dispatched to the callbacks the Python classes take.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable

from tccl import roce
from tccl.dcqcn import DcqcnParams, increase_stage
from tccl.nic.build import MAX_MTU, MAX_WINDOW, load
from tccl.qp import PortChange, RequesterStats, ResponderStats

_nic = load()
ffi, lib = _nic.ffi, _nic.lib

_RESP_STATS = [f.name for f in dataclasses.fields(ResponderStats)]
_REQ_STATS = [f.name for f in dataclasses.fields(RequesterStats)]


def c_params(p: DcqcnParams) -> Any:
    """DCQCN parameters as the C struct."""
    c = ffi.new("nic_dcqcn_params *")
    for f in dataclasses.fields(p):
        setattr(c, f.name, getattr(p, f.name))
    return c


def header(template: roce.FrameTemplate) -> bytes:
    """A template's Ethernet/IPv4/UDP/BTH headers, as C patches them per frame."""
    return template.frame(roce.SEND_ONLY, 0)[:roce.HDR_LEN]


class Completions:
    """A completion queue and where its entries go: the QP objects by tag, the posted
    messages' ``on_done`` by work-request id. A device's queue is filled by the NIC's
    thread: `reap` moves its entries, under the device's lock, into a queue of the
    library's own and dispatches them from there."""

    def __init__(self, cq: Any = None) -> None:
        self._own = ffi.new("nic_cq *") if cq is None else None
        self.cq = cq if cq is not None else self._own
        self._reaped = ffi.new("nic_cq *")
        self.owners: dict[int, Any] = {}
        self.on_done: dict[int, Callable[[], None]] = {}
        self._tags = itertools.count(1)
        self._wr_ids = itertools.count(1)

    def __del__(self) -> None:
        lib.nic_cq_free(self._reaped)
        if self._own is not None:
            lib.nic_cq_free(self._own)

    def tag(self, owner: Any) -> int:
        t = next(self._tags)
        self.owners[t] = owner
        return t

    def wr_id(self, on_done: Callable[[], None] | None) -> int:
        w = next(self._wr_ids)
        if on_done is not None:
            self.on_done[w] = on_done
        return w

    def read(self, ctype: str, src: Any) -> Any:
        """A copy of the C state ``src`` (a ``ctype``), taken under the device's lock
        (a consistent snapshot while the NIC's thread runs)."""
        out = ffi.new(ctype + " *")
        lib.nic_cq_read(self.cq, out, src, ffi.sizeof(ctype))
        return out

    def reap(self) -> None:
        """Dispatch every completion waiting (the queue is emptied first: a callback
        may post, and a post may complete at once)."""
        got = self._reaped
        lib.nic_cq_drain(self.cq, got)
        if got.oom:
            lib.nic_cq_clear(got)
            raise MemoryError("native NIC: out of memory for a completion")
        n = got.n
        if not n:
            return
        entries = []
        for i in range(n):
            e = got.e[i]
            data = ffi.unpack(ffi.cast("char *", e.data), e.len) if e.kind == lib.NIC_CQ_RECV else None
            entries.append((e.kind, e.user, e.wr_id, data))
        lib.nic_cq_clear(got)
        for kind, user, wr_id, data in entries:
            if kind == lib.NIC_CQ_SEND:
                done = self.on_done.pop(wr_id, None)
                if done is not None:
                    done()
            elif kind == lib.NIC_CQ_RECV:
                self.owners[user].on_message(data)
            else:
                self.owners[user].port_applied()


class DcqcnRate:
    """`tccl.dcqcn.DcqcnRate` on the C state: its own, or a requester's (``requester``:
    its C state, kept alive with this view; `advance` then takes the device's lock)."""

    def __init__(self, params: DcqcnParams, now: float, requester: Any = None) -> None:
        self.p = params
        if requester is None:
            c = ffi.new("nic_dcqcn *")
            lib.nic_dcqcn_init(c, c_params(params), now)
        else:
            c = ffi.addressof(requester, "rate")
        self._c = c
        self._requester = requester

    rc = property(lambda self: self._c.rc)
    rt = property(lambda self: self._c.rt)
    alpha = property(lambda self: self._c.alpha)
    timer_count = property(lambda self: self._c.timer_count)
    byte_count = property(lambda self: self._c.byte_count)
    cnps = property(lambda self: self._c.cnps)

    def on_cnp(self, now: float) -> None:
        lib.nic_dcqcn_on_cnp(self._c, now)

    def on_sent(self, nbytes: int, now: float) -> None:
        lib.nic_dcqcn_on_sent(self._c, nbytes, now)

    def advance(self, now: float) -> None:
        if self._requester is not None:
            lib.nic_requester_advance_rate(self._requester, now)
        else:
            lib.nic_dcqcn_advance(self._c, now)

    @property
    def stage(self) -> str:
        return increase_stage(self.timer_count, self.byte_count, self.p.fast_recovery_steps)


class Requester:
    """`tccl.qp.Requester` on the C state machine; ``completions`` is the device's
    queue when the QP belongs to one (default: its own)."""

    def __init__(self, qpn: int, template: roce.FrameTemplate, params: DcqcnParams, now: float,
                 mtu: int = 1024, window: int = 64, rto: float = 0.2,
                 make_template: Callable[[int], roce.FrameTemplate] | None = None,
                 completions: Completions | None = None) -> None:
        if mtu < 1 or window < 1 or rto <= 0:
            raise ValueError(f"mtu, window and rto must be positive, got {mtu}, {window}, {rto}")
        self.qpn = qpn
        self.template = template
        self.mtu, self.window, self.rto = mtu, window, rto
        self._make_template = make_template
        self.completions = completions or Completions()
        c = lib.nic_requester_new(qpn, header(template), roce.HDR_LEN, c_params(params), now, mtu, window,
                                  rto, self.completions.cq, self.completions.tag(self))
        if c == ffi.NULL:
            raise ValueError(f"QP {qpn:#x}: the native NIC takes an MTU of 1..{MAX_MTU} "
                             f"and a window of 1..{MAX_WINDOW}, got {mtu} and {window}")
        self._c = ffi.gc(c, lib.nic_requester_free)
        self.rate = DcqcnRate(params, now, self._c)
        self._buf = ffi.new("uint8_t[]", lib.nic_requester_frame_cap(self._c))
        self.port_change: PortChange | None = None

    @property
    def stats(self) -> RequesterStats:
        s = self.completions.read("nic_req_stats", ffi.addressof(self._c, "stats"))
        return RequesterStats(**{f: getattr(s, f) for f in _REQ_STATS})

    @property
    def una(self) -> int:
        return self._c.una

    @property
    def nxt(self) -> int:
        return self._c.nxt

    def post(self, data: bytes | bytearray | memoryview, on_done: Callable[[], None] | None = None,
             now: float | None = None) -> None:
        if len(data) == 0:
            raise ValueError("a message carries at least one byte")
        wr = self.completions.wr_id(on_done)
        if lib.nic_requester_post(self._c, ffi.from_buffer(data), len(data), wr, now is not None,
                                  0.0 if now is None else now) != 0:
            self.completions.on_done.pop(wr, None)
            raise MemoryError(f"QP {self.qpn:#x}: no memory for a {len(data)}-byte message")

    @property
    def idle(self) -> bool:
        return bool(lib.nic_requester_idle(self._c))

    @property
    def sport(self) -> int:
        return lib.nic_requester_sport(self._c)

    def request_port(self, port: int, on_applied: Callable[[], None] | None = None) -> PortChange:
        if not 1024 <= port <= 65535:
            raise ValueError(f"UDP source port must be 1024..65535, got {port}")
        if self._make_template is None:
            raise ValueError(f"QP {self.qpn:#x} cannot change its source port (no template factory)")
        template = self._make_template(port)
        change = PortChange(port, old_port=self.sport, on_applied=on_applied)
        self.port_change = change
        self._pending = template
        lib.nic_requester_request_port(self._c, header(template), roce.HDR_LEN)
        self.completions.reap()
        return change

    def port_applied(self) -> None:
        """The C side switched to the pending headers (a completion)."""
        change, self.port_change = self.port_change, None
        self.template = self._pending
        if change is not None:
            change.applied()

    def ready_at(self) -> float | None:
        at = ffi.new("double *")
        return at[0] if lib.nic_requester_ready_at(self._c, at) else None

    def sendable_at(self) -> float | None:
        at = ffi.new("double *")
        return at[0] if lib.nic_requester_sendable_at(self._c, at) else None

    def next_frame(self, now: float) -> bytes | None:
        n = lib.nic_requester_next_frame(self._c, now, self._buf, len(self._buf))
        self.completions.reap()           # a port change applied at a message's start
        return ffi.unpack(ffi.cast("char *", self._buf), n) if n else None

    def on_ack(self, psn: int, nak: bool, now: float) -> None:
        lib.nic_requester_on_ack(self._c, psn, nak, now)
        self.completions.reap()

    def on_cnp(self, now: float) -> None:
        lib.nic_requester_on_cnp(self._c, now)

    def check_timeout(self, now: float) -> float | None:
        at = ffi.new("double *")
        return at[0] if lib.nic_requester_check_timeout(self._c, now, at) else None


class Responder:
    """`tccl.qp.Responder` on the C state machine (``completions`` as for `Requester`)."""

    def __init__(self, qpn: int, template: roce.FrameTemplate, cnp_template: roce.FrameTemplate,
                 cnp_interval: float, on_message: Callable[[bytes], None],
                 completions: Completions | None = None) -> None:
        self.qpn = qpn
        self.template, self.cnp_template = template, cnp_template
        self.cnp_interval = cnp_interval
        self.on_message = on_message
        self.completions = completions or Completions()
        c = lib.nic_responder_new(qpn, header(template), roce.HDR_LEN, header(cnp_template), roce.HDR_LEN,
                                  cnp_interval, self.completions.cq, self.completions.tag(self))
        if c == ffi.NULL:
            raise MemoryError(f"QP {qpn:#x}: no memory for a responder")
        self._c = ffi.gc(c, lib.nic_responder_free)
        self._pkt = ffi.new("nic_parsed *")
        self._out = ffi.new("nic_reply *")

    @property
    def stats(self) -> ResponderStats:
        s = self.completions.read("nic_resp_stats", ffi.addressof(self._c, "stats"))
        return ResponderStats(**{f: getattr(s, f) for f in _RESP_STATS})

    @property
    def epsn(self) -> int:
        return self._c.epsn

    @property
    def msn(self) -> int:
        return self._c.msn

    @property
    def last_sport(self) -> int:
        return self._c.last_sport

    def on_frame(self, pkt: roce.Parsed, frame: bytes, now: float) -> list[bytes]:
        """Handle one data frame (``pkt`` is `roce.parse`'s view of it: C parses it
        again, bounds-checked); returns the frames to send back."""
        if not lib.nic_parse(frame, len(frame), self._pkt):
            raise ValueError("not a RoCEv2 frame")
        out = self._out
        lib.nic_responder_on_frame(self._c, frame, len(frame), self._pkt, now, out)
        self.completions.reap()
        return [ffi.unpack(ffi.cast("char *", out.frame[i]), out.len[i]) for i in range(out.n)]
