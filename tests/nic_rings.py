"""A native NIC device on fake receive rings, without namespaces or root: each ring is a
bytearray laid out as the kernel lays out a TPACKET_V2 PACKET_RX_RING, filled here
slot by slot (header, timestamp, frame), and the device's socket is one end of a Unix
datagram pair, whose other end shows what it sent. Used by tests/test_nic_device.py
and by the sanitizer fuzz (tests/nic_fuzz.py)."""

from __future__ import annotations

import socket
import struct
import time
from types import ModuleType
from typing import Any

from tccl import roce
from tccl.dcqcn import DcqcnParams, Scale
from tccl.job import qpn

BLOCK, FRAME, BLOCKS = 1 << 16, 9216, 2
SLOTS = (BLOCK // FRAME) * BLOCKS
MAC_AT = 80                          # where a slot's frame starts (the kernel: 66, aligned)
TP_STATUS_USER = 1
A = roce.Endpoint("02:00:00:00:00:0a", "10.0.0.1")
B = roce.Endpoint("02:00:00:00:00:0b", "10.0.0.2")
LINE_RATE = 20e6
PARAMS = DcqcnParams().scaled(Scale.for_line_rate(LINE_RATE))
FRAME_TIME = (1024 + roce.HDR_LEN + roce.ICRC_LEN) * 8 / LINE_RATE


class FakeRing:
    """A receive ring in memory that the C reader reads as the kernel's."""

    def __init__(self, nic: ModuleType) -> None:
        self.nic = nic
        self.mem = bytearray(BLOCK * BLOCKS)
        self.buf = nic.ffi.from_buffer("uint8_t[]", self.mem)
        self.next = 0

    def c(self) -> dict[str, Any]:
        return {"base": self.buf, "len": len(self.mem), "block_size": BLOCK, "frame_size": FRAME,
                "frames": SLOTS, "next": 0}

    def slot(self, i: int) -> int:
        per = BLOCK // FRAME
        return (i // per) * BLOCK + (i % per) * FRAME

    def push(self, frame: bytes, at_ns: int | None = None, status: int = TP_STATUS_USER, pkttype: int = 0,
             snaplen: int | None = None, wire_len: int | None = None, mac: int = MAC_AT) -> bool:
        """Put ``frame`` in the next slot as arrived at CLOCK_REALTIME ``at_ns`` (default:
        now); False if the ring is full (the reader has not handed that slot back)."""
        at = self.slot(self.next)
        if struct.unpack_from("I", self.mem, at)[0] & TP_STATUS_USER:
            return False
        at_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) if at_ns is None else at_ns
        n = len(frame)
        fits = min(n, max(0, FRAME - mac))
        self.mem[at + mac:at + mac + fits] = frame[:fits]
        self.mem[at + 32 + 10] = pkttype
        # struct tpacket2_hdr after tp_status: len, snaplen, mac, net, sec, nsec, VLAN tci, tpid.
        struct.pack_into("IIHHIIHH", self.mem, at + 4, wire_len if wire_len is not None else n,
                         snaplen if snaplen is not None else n, mac, mac, at_ns // 10**9, at_ns % 10**9, 0, 0)
        struct.pack_into("I", self.mem, at, status)   # last: the slot is the reader's now
        self.next = (self.next + 1) % SLOTS
        return True

    def release(self) -> None:
        self.nic.ffi.release(self.buf)


class Device:
    """A C device with one port on fake rings and one QP (rank 0 -> rank 1) whose
    peer is simulated by the test: it pushes frames into ``data``/``pause`` and reads
    what the device sent from ``wire``."""

    def __init__(self, nic: ModuleType, completions_cls: Any, requester_cls: Any, responder_cls: Any,
                 dilation: float = 1.0) -> None:
        ffi, lib = nic.ffi, nic.lib
        self.nic = nic
        self.origin_ns = time.monotonic_ns()
        self.c = ffi.gc(lib.nic_device_new(self.origin_ns, dilation, FRAME_TIME, 512, 64, 2.0), lib.nic_device_free)
        self.completions = completions_cls(ffi.addressof(self.c, "cq"))
        self.data, self.pause = FakeRing(nic), FakeRing(nic)
        self.wire, self._end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.wire.setblocking(False)
        self.port = lib.nic_device_add_port(self.c, self._end.fileno(), self._end.fileno(), self.data.c(), self.pause.c(),
                                            socket.inet_aton(A.ip), LINE_RATE, 3)
        assert self.port == 0
        self.delivered: list[bytes] = []
        self.qpn, self.peer_qpn = qpn(0, 1), qpn(1, 0)
        make = lambda port: roce.FrameTemplate(A, B, port, self.peer_qpn, dscp=26)  # noqa: E731
        self.req = requester_cls(self.qpn, make(50000), PARAMS, 0.0, mtu=1024, window=16, rto=0.05,
                                 make_template=make, completions=self.completions)
        self.resp = responder_cls(self.qpn, roce.FrameTemplate(A, B, 50000, self.peer_qpn, dscp=26, ecn=0),
                                  roce.FrameTemplate(A, B, 50000, self.peer_qpn, dscp=48, ecn=0),
                                  PARAMS.cnp_interval, self.delivered.append, completions=self.completions)
        assert lib.nic_device_add_qp(self.c, 0, self.qpn, self.req._c, self.resp._c) == 0
        # What the peer sends: its data towards our QP, its ACKs of ours.
        self.peer = roce.FrameTemplate(B, A, 50001, self.qpn, dscp=26)

    def now(self) -> float:
        return (time.monotonic_ns() - self.origin_ns) / 1e9

    def emulated(self, realtime_ns: int) -> float:
        """The emulated time of a CLOCK_REALTIME stamp (as the device converts it)."""
        ahead = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
        return (realtime_ns - ahead - self.origin_ns) / 1e9

    def receive(self, skip_unknown: bool = True) -> int:
        lib = self.nic.lib
        n = lib.nic_device_receive(self.c, self.now())
        while skip_unknown and self.c.need_qpn != lib.NIC_NO_QPN:
            lib.nic_device_skip(self.c)
            n += lib.nic_device_receive(self.c, self.now())
        self.completions.reap()
        return n

    def service(self, now: float | None = None) -> float | None:
        due = self.nic.ffi.new("double *")
        has = self.nic.lib.nic_device_service(self.c, self.now() if now is None else now, due)
        self.completions.reap()
        return due[0] if has else None

    def sent(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.wire.recv(65536))
            except BlockingIOError:
                return out

    def close(self) -> None:
        self.nic.lib.nic_device_stop(self.c)          # its thread, if a test started it
        self.data.release()
        self.pause.release()
        self.wire.close()
        self._end.close()
