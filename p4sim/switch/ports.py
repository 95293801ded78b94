"""Ports on Linux interfaces: raw AF_PACKET sockets, non-blocking, batched.

The switch's ports and the TCCL agents' NICs both use `InterfacePort` (the agents bind
IPv4 only and leave the interface out of promiscuous mode), so there is one receive
ring reader.

A port must see every frame that arrives on its interface exactly as it was on the
wire, and never the frames the switch itself transmits on that interface (a raw packet
socket normally gets both, which would loop every forwarded packet back into the
pipeline). Three kernel facilities give that:

* ``PACKET_IGNORE_OUTGOING`` (Linux >= 4.20) stops the kernel from queueing our own
  transmissions to the socket at all; on older kernels the per-packet ``sll_pkttype``
  (PACKET_OUTGOING) filters them after the fact;
* ``PACKET_MR_PROMISC`` membership, so a real NIC passes frames for any MAC (released
  automatically when the socket closes);
* the kernel strips 802.1Q tags into metadata before packet sockets see a frame; the
  tag is put back from that metadata so that the P4 parser sees the frame as sent
  (libpcap, which BMv2 uses, does the same).

A frame a local host sent with checksum offload (every veth by default) reaches the
switch with its TCP/UDP checksum left for the "hardware" to fill in (the kernel says
so: TP_STATUS_CSUMNOTREADY). The port fills it in, so that the pipeline, captures and
the next host see the frame as it would be on a wire. Segmentation offload (TSO/GSO)
cannot be undone here: such frames exceed the MTU and are reported, naming the fix.

Frames are received through a ``PACKET_RX_RING`` (TPACKET_V2) shared with the kernel:
reading a frame is a memory copy instead of a system call, several times cheaper
than ``recvmsg`` from Python (under 1 us against 3-4 us a frame on the project's
machine).
A slot holds a 9000-byte-MTU jumbo frame; a frame too big even for that (GRO/TSO
aggregates) is marked TP_STATUS_COPY and read whole from the socket's ordinary queue
(PACKET_COPY_THRESH).

Each frame comes with its arrival time: the kernel's receive timestamp from the ring
slot's header, so a frame that waited in the ring while the process was off the CPU
still says when it arrived. The kernel stamps packet sockets in CLOCK_REALTIME only
(``PACKET_TIMESTAMP`` chooses between software and hardware stamps, and veths have no
hardware; ``SO_TIMESTAMPING`` has no monotonic clock either), while the emulation
clock is CLOCK_MONOTONIC: each batch converts with the offset between the two read
just before it, which follows any step of the wall clock within one batch.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import mmap
import os
import socket
import struct
import sys
import time
from array import array
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_STATISTICS = 6
PACKET_RX_RING = 5
PACKET_COPY_THRESH = 7
PACKET_AUXDATA = 8
PACKET_VERSION = 10
PACKET_IGNORE_OUTGOING = 23
TPACKET_V2 = 1
PACKET_OUTGOING = 4
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_COPY = 1 << 1
TP_STATUS_CSUMNOTREADY = 1 << 3
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
AUXDATA = struct.Struct("IIIHHHH")  # struct tpacket_auxdata
TPACKET2_HDR = struct.Struct("IIIHHIIHH")  # struct tpacket2_hdr (without padding)
SLL_PKTTYPE_AT = 32 + 10  # sockaddr_ll.sll_pkttype, after the 32-byte tpacket2_hdr
_KERNEL_OWNED = TP_STATUS_KERNEL.to_bytes(4, "little")
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8
ETH_P_IPV4 = 0x0800
ETH_P_IPV6 = 0x86DD
SIOCGIFMTU = 0x8921
SIOCGIFHWADDR = 0x8927
SIOCGIFFLAGS = 0x8913
# ifr_flags bits: administratively up, and operationally up (the kernel's
# netif_oper_up: carrier present, so a veth whose peer is down is not RUNNING).
IFF_UP = 0x1
IFF_RUNNING = 0x40
# Offset of the checksum field in the L4 header, by IP protocol number.
L4_CHECKSUM_AT = {6: 16, 17: 6}  # TCP, UDP
# Plain ints: socket.MSG_TRUNC is an IntFlag, and enum arithmetic per packet is slow.
MSG_TRUNC = int(socket.MSG_TRUNC)

# Largest frame a port accepts: 64 KiB covers jumbo frames and GRO aggregates; anything
# larger is reported as truncated and dropped rather than forwarded cut short.
MAX_FRAME = 65536
# Receive ring. A slot is 9216 bytes: the kernel puts a frame 66 bytes into its slot
# (tpacket2_hdr and sockaddr_ll, 16-byte aligned), and a 9000-byte-MTU frame with its
# Ethernet header (a VLAN tag travels as metadata) is 9014 bytes, so 9080 bytes, rounded
# up to a multiple of 1 KiB. RoCE frames of path MTU 4096 (~4150 bytes) fit with room to
# spare. Slots do not cross blocks: a 64 KiB block (an easy allocation) holds 7 of them,
# 1.6 % left unused. 64 blocks are 4 MiB of kernel memory per port (a fabric of 50
# ports and 16 NICs pins ~260 MiB) and 448 slots: what a port receives is paced by the
# link in front of it, so at 10 Mbit/s that rides out 0.4 s without the CPU with 1 KiB
# frames and 1.5 s with 4 KiB frames (at 10 kpps from an unpaced sender, 45 ms) --
# a P4Runtime batch, a GC pause, other processes on a loaded machine -- without drops.
RING_FRAME = 9216
RING_BLOCK = 1 << 16
RING_BLOCKS = 64
RING_FRAMES_PER_BLOCK = RING_BLOCK // RING_FRAME
RING_FRAMES = RING_FRAMES_PER_BLOCK * RING_BLOCKS
# Socket receive buffer, used only by frames too large for a ring slot.
RCVBUF_BYTES = 4 << 20
# Errors on transmit that mean "this frame is lost", like a full NIC ring on a switch;
# they are counted, never raised.
TX_LOSS_ERRNOS = {errno.EAGAIN, errno.ENOBUFS, errno.ENETDOWN, errno.EMSGSIZE,
                  errno.ENXIO, errno.EINVAL}


class PortError(Exception):
    """A port's interface cannot be opened (missing, no permission)."""


_libc = ctypes.CDLL(None, use_errno=True)


def _set_rx_ring(sock: socket.socket, request: bytes) -> None:
    """setsockopt(PACKET_RX_RING) through libc, with the interpreter lock released
    (CPython's ``socket.setsockopt`` keeps it): the kernel waits an RCU grace period in
    it (``synchronize_net``, ~8 ms here), which ports opened on threads (`open_ports`)
    then wait out together instead of one after another."""
    buf = ctypes.create_string_buffer(request, len(request))
    if _libc.setsockopt(sock.fileno(), SOL_PACKET, PACKET_RX_RING, buf, len(request)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def open_ports(wanted: Sequence[Mapping[str, Any]]) -> list[InterfacePort]:
    """``InterfacePort(**kwargs)`` for each of ``wanted``, in its order, opened at once
    on threads: 8 ports take ~16 ms instead of ~73 (`_set_rx_ring`), a tenth of a
    default fabric's start-up. On a failure the ports that opened are closed and the
    first error is raised."""
    if len(wanted) < 2:
        return [InterfacePort(**kwargs) for kwargs in wanted]
    with ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="port-open") as pool:
        futures = [pool.submit(InterfacePort, **kwargs) for kwargs in wanted]
    opened, errors = [], []
    for future in futures:
        try:
            opened.append(future.result())
        except Exception as e:
            errors.append(e)
    if errors:
        for port in opened:
            port.close()
        raise errors[0]
    return opened


def close_ports(ports: Iterable["InterfacePort"]) -> None:
    """Close ``ports`` side by side: the kernel waits for an RCU grace period in every
    close of a packet socket (synchronize_net, ~25 ms on this VM), so one after another
    a spine's 8 ports took 0.2 s of every switch stop, and an agent's 8 (a data and a
    PAUSE port per NIC) 0.2 s at the end of every job; at once, 40-60 ms. A port's
    error is raised once every port is closed."""
    ports = list(ports)
    if len(ports) < 2:
        for port in ports:
            port.close()
        return
    with ThreadPoolExecutor(max_workers=len(ports), thread_name_prefix="port-close") as pool:
        list(pool.map(InterfacePort.close, ports))


class InterfacePort:
    """Port ``number`` attached to Linux interface ``iface``.

    A switch port takes every frame (``protocol`` ETH_P_ALL, ``promisc``); a host's NIC
    takes what is addressed to it, of one ethertype (e.g. ETH_P_IPV4, promisc off).
    ``name`` is what messages call it (default ``port <number>``); ``ring_blocks`` sizes
    the receive ring (a port for a few small frames, e.g. PAUSE, needs less).
    """

    def __init__(self, number: int, iface: str, protocol: int = ETH_P_ALL, promisc: bool = True,
                 name: str | None = None, ring_blocks: int = RING_BLOCKS) -> None:
        self.number = number
        self.ring_blocks = ring_blocks
        self._ring_frames = RING_FRAMES_PER_BLOCK * ring_blocks
        self.iface = iface
        self.name = name or f"port {number}"
        self.tx_errors = 0
        self.rx_truncated = 0
        self.rx_copied = 0  # frames too big for a slot, read from the socket's queue
        self.kernel_drops = 0
        self._gso_reported = False
        self._ring: mmap.mmap | None = None
        try:
            ifindex = socket.if_nametoindex(iface)
        except OSError as e:
            raise PortError(f"{self.name}: cannot open interface '{iface}': {e.strerror or e}") from e
        try:
            # Protocol 0 receives nothing until bound: every frame the socket ever gets
            # arrives after the ring exists, and only from this interface.
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except PermissionError as e:
            raise PortError(f"{self.name}: raw sockets need root (CAP_NET_RAW): {e}") from e
        try:
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass  # kernel < 4.20: recv_batch drops them by sll_pkttype instead
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
            sock.setsockopt(SOL_PACKET, PACKET_COPY_THRESH, 1)
            sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
            _set_rx_ring(sock, struct.pack("IIII", RING_BLOCK, ring_blocks, RING_FRAME, self._ring_frames))
            self._ring = mmap.mmap(sock.fileno(), RING_BLOCK * ring_blocks, mmap.MAP_SHARED,
                                   mmap.PROT_READ | mmap.PROT_WRITE)
            sock.bind((iface, protocol))
            if promisc:
                sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP,
                                struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b""))
            sock.setblocking(False)
        except OSError as e:
            if self._ring is not None:
                self._ring.close()
            sock.close()
            raise PortError(f"{self.name}: cannot open interface '{iface}': {e.strerror or e}") from e
        self._sock = sock
        ifreq = fcntl.ioctl(sock, SIOCGIFMTU, struct.pack("16si12x", iface.encode(), 0))
        self._max_frame = struct.unpack_from("i", ifreq, 16)[0] + 18  # Ethernet + one tag
        # The interface's MAC (struct sockaddr in the ifreq: family, then the address):
        # the source of frames the port's MAC makes itself (PAUSE).
        ifreq = fcntl.ioctl(sock, SIOCGIFHWADDR, struct.pack("16s16x", iface.encode()))
        self.mac = ifreq[18:24]
        self._next = 0  # ring slot the kernel fills next, in order
        # Where each slot starts in the mapping (blocks may end in unused bytes).
        self._slots = [b * RING_BLOCK + f * RING_FRAME
                       for b in range(ring_blocks) for f in range(RING_FRAMES_PER_BLOCK)]
        self._buf = bytearray(MAX_FRAME)
        self._view = memoryview(self._buf)
        self._anc_size = socket.CMSG_SPACE(AUXDATA.size)

    def fileno(self) -> int:
        return self._sock.fileno()

    def recv_batch(self, limit: int) -> tuple[list[bytes], list[int], bool]:
        """Take up to ``limit`` frames from the receive ring without blocking.

        Returns the frames, their arrival times (a parallel list: CLOCK_MONOTONIC ns,
        the kernel's receive timestamps; `EmulationClock.from_monotonic_ns` makes them
        emulated time) and whether the limit was hit (more may be waiting), which the
        device uses to notice a growing input backlog.
        """
        frames: list[bytes] = []
        stamps: list[int] = []
        ring, slot, slots = self._ring, self._next, self._slots
        unpack = TPACKET2_HDR.unpack_from
        realtime_ahead = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
        while len(frames) < limit:
            at = slots[slot]
            status, length, snaplen, mac, _, sec, nsec, tci, tpid = unpack(ring, at)
            if not status & TP_STATUS_USER:
                if not frames:
                    self._check_error()
                break
            if status & TP_STATUS_COPY:
                self.rx_copied += 1
                frame = self._recv_whole()
            elif ring[at + SLL_PKTTYPE_AT] == PACKET_OUTGOING:
                frame = None
            elif snaplen < length:  # too big for a slot, and no room for a whole copy
                self._drop_oversize(length)
                frame = None
            else:
                frame = self._as_on_wire(ring[at + mac:at + mac + snaplen], status, tci, tpid)
            ring[at:at + 4] = _KERNEL_OWNED  # hand the slot back
            slot = (slot + 1) % self._ring_frames
            if frame is not None:
                frames.append(frame)
                stamps.append(sec * 1_000_000_000 + nsec - realtime_ahead)
        self._next = slot
        return frames, stamps, len(frames) == limit

    def ring(self) -> tuple[mmap.mmap, int, int, int, int]:
        """The receive ring, for the native loop to read instead of `recv_batch`: the
        mapping, block size, blocks, slot size, and the largest frame of the
        interface (MTU, Ethernet header, one tag), beyond which a checksum-offloaded
        frame is a segmentation-offload aggregate."""
        return self._ring, RING_BLOCK, self.ring_blocks, RING_FRAME, self._max_frame

    def nic_ring(self) -> tuple[mmap.mmap, int, int, int, int]:
        """The receive ring for a reader in C (tccl/nic): the mapping, its block size,
        slot size, number of slots and the slot the kernel fills next. Such a reader
        takes the ring over from that slot on (the port is then read only there); it
        hands each slot back by zeroing its status, as `recv_batch` does."""
        assert self._ring is not None
        return self._ring, RING_BLOCK, RING_FRAME, self._ring_frames, self._next

    def clear_error(self) -> None:
        """Clear a pending socket error (for a reader of the ring in C: `recv_batch`
        does it when it finds the ring empty)."""
        self._check_error()

    def ready(self) -> bool:
        """A frame is waiting in the ring (a memory read, no system call)."""
        return bool(self._ring[self._slots[self._next]] & TP_STATUS_USER)

    def _check_error(self) -> None:
        """Clear a pending socket error (epoll keeps reporting it until read)."""
        err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err == errno.ENETDOWN:
            # The kernel reports a link going down once, as an error on the socket; the
            # port keeps working when the link comes back up.
            log.info("%s (%s): link went down", self.name, self.iface)
        elif err:
            log.warning("%s (%s): socket error: %s", self.name, self.iface, os.strerror(err))

    def _drop_oversize(self, length: int) -> None:
        self.rx_truncated += 1
        log.warning("%s (%s): dropped a %d-byte frame that could not be received whole",
                    self.name, self.iface, length)

    def _recv_whole(self) -> bytes | None:
        """Read a frame that did not fit a ring slot from the socket's own queue."""
        try:
            n, anc, flags, _ = self._sock.recvmsg_into([self._view], self._anc_size, MSG_TRUNC)
        except (BlockingIOError, InterruptedError):
            return None  # the copy was not queued (socket buffer full): lost
        if n > MAX_FRAME or flags & MSG_TRUNC:
            self._drop_oversize(n)
            return None
        frame = bytes(self._buf[:n])
        for level, kind, data in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= AUXDATA.size:
                status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(data)
                return self._as_on_wire(frame, status, tci, tpid)
        return frame

    def _as_on_wire(self, frame: bytes, status: int, tci: int, tpid: int) -> bytes:
        """Undo what the kernel did to a frame after the wire: stripped VLAN tag,
        checksum left to offload."""
        if status & TP_STATUS_VLAN_VALID:
            frame = _with_tag(frame, tci, tpid if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q)
        if status & TP_STATUS_CSUMNOTREADY:
            if len(frame) > self._max_frame and not self._gso_reported:
                self._gso_reported = True
                log.warning("%s (%s): received a %d-byte frame, larger than the MTU: the "
                            "sending host uses segmentation offload; turn it off there "
                            "(ethtool -K <host-iface> tso off gso off)",
                            self.name, self.iface, len(frame))
            frame = complete_l4_checksum(frame)
        return frame

    def send(self, frame: bytes) -> bool:
        """Transmit one frame; a frame the kernel refuses is counted and reported lost."""
        try:
            self._sock.send(frame)
            return True
        except OSError as e:
            if e.errno not in TX_LOSS_ERRNOS:
                raise
            self.tx_errors += 1
            log.debug("%s (%s): transmit failed: %s", self.name, self.iface, e.strerror)
            return False

    def oper_up(self) -> bool:
        """Whether the interface is operationally up (IFF_UP and IFF_RUNNING), read in
        the process's own network namespace: a switch on another machine (cluster
        mode) reports its own cables, which the controller's ``/sys`` does not show.
        An interface that is gone is down."""
        try:
            ifreq = fcntl.ioctl(self._sock, SIOCGIFFLAGS, struct.pack("16sH14x", self.iface.encode(), 0))
        except OSError:
            return False
        flags = struct.unpack_from("H", ifreq, 16)[0]
        return flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING

    def poll_kernel_drops(self) -> int:
        """Frames the kernel dropped since the last call because the socket was full."""
        raw = self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        _, drops = struct.unpack("II", raw)
        self.kernel_drops += drops
        return drops

    def close(self) -> None:
        self._ring.close()
        self._sock.close()


def complete_l4_checksum(frame: bytes) -> bytes:
    """``frame`` with its TCP/UDP checksum computed, as a NIC with checksum offload does.

    The field holds the pseudo-header sum, so the checksum is the complement of the sum
    over the L4 segment as it stands (Linux's skb_checksum_help). Frames that are not
    TCP/UDP over IPv4/IPv6 (no extension headers) are returned unchanged.
    """
    at = 12
    ethertype = int.from_bytes(frame[at:at + 2], "big")
    while ethertype in (ETH_P_8021Q, ETH_P_8021AD):
        at += 4
        ethertype = int.from_bytes(frame[at:at + 2], "big")
    l3 = at + 2
    if ethertype == ETH_P_IPV4 and len(frame) >= l3 + 20:
        l4 = l3 + (frame[l3] & 0xF) * 4
        proto = frame[l3 + 9]
        end = l3 + int.from_bytes(frame[l3 + 2:l3 + 4], "big")
    elif ethertype == ETH_P_IPV6 and len(frame) >= l3 + 40:
        l4 = l3 + 40
        proto = frame[l3 + 6]
        end = l4 + int.from_bytes(frame[l3 + 4:l3 + 6], "big")
    else:
        return frame
    field = L4_CHECKSUM_AT.get(proto)
    if field is None or not l4 + field + 2 <= end <= len(frame):
        return frame
    segment = frame[l4:end]
    if len(segment) % 2:
        segment += b"\0"
    total = sum(array("H", segment))  # native byte order: the result is swapped back below
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    checksum = ~total & 0xFFFF
    if proto == 17 and checksum == 0:
        checksum = 0xFFFF  # UDP: 0 means "no checksum"
    at = l4 + field
    return frame[:at] + checksum.to_bytes(2, sys.byteorder) + frame[at + 2:]


def _with_tag(frame: bytes, tci: int, tpid: int) -> bytes:
    """``frame`` with the 802.1Q tag the kernel stripped put back after the MAC addresses."""
    return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
