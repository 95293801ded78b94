"""Per-port packet captures in the classic pcap format (what BMv2's ``--pcap`` writes).

One file per port and direction, ``<iface>_in.pcap`` and ``<iface>_out.pcap`` (BMv2
names them after the interface, e.g. ``s1-eth1_in.pcap``), readable by tcpdump,
Wireshark and Scapy's ``rdpcap``. Records are buffered and flushed by the device after
each batch of work, so a capture can be read while the switch runs without paying a
system call per packet.
"""

from __future__ import annotations

import os
import struct
import time
from typing import BinaryIO

PCAP_MAGIC = 0xA1B2C3D4  # microsecond timestamps
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535
_GLOBAL_HEADER = struct.Struct("<IHHiIII")
_RECORD_HEADER = struct.Struct("<IIII")


class PcapWriter:
    """Appends Ethernet frames to one pcap file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: BinaryIO = open(path, "wb")
        self._file.write(_GLOBAL_HEADER.pack(PCAP_MAGIC, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        self._file.flush()
        self._dirty = False

    def write(self, frame: bytes, timestamp: float | None = None) -> None:
        """Record ``frame`` seen at ``timestamp`` (seconds since the epoch; now if None)."""
        ts = time.time() if timestamp is None else timestamp
        sec = int(ts)
        usec = int((ts - sec) * 1_000_000)
        caplen = min(len(frame), SNAPLEN)
        self._file.write(_RECORD_HEADER.pack(sec, usec, caplen, len(frame)))
        self._file.write(frame[:caplen])
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            self._file.flush()
            self._dirty = False

    def close(self) -> None:
        self._file.close()

    def detach(self) -> int:
        """Hand the file over (the native loop appends the records): a descriptor
        positioned after what was written, owned by the caller; this writer is closed."""
        self._file.flush()
        fd = os.dup(self._file.fileno())
        self._file.close()
        return fd


class PortCaptures:
    """The in/out capture pair of every port, keyed by port number."""

    def __init__(self, directory: str, port_names: dict[int, str]) -> None:
        os.makedirs(directory, exist_ok=True)
        self._in = {p: PcapWriter(os.path.join(directory, f"{n}_in.pcap")) for p, n in port_names.items()}
        self._out = {p: PcapWriter(os.path.join(directory, f"{n}_out.pcap")) for p, n in port_names.items()}

    def received(self, port: int, frame: bytes) -> None:
        writer = self._in.get(port)
        if writer is not None:
            writer.write(frame)

    def sent(self, port: int, frame: bytes) -> None:
        writer = self._out.get(port)
        if writer is not None:
            writer.write(frame)

    def detach(self) -> dict[int, tuple[int, int]]:
        """Every port's (in, out) capture as descriptors for the native loop
        (`PcapWriter.detach`); these captures are closed."""
        return {p: (self._in[p].detach(), self._out[p].detach()) for p in self._in}

    def flush(self) -> None:
        for writer in (*self._in.values(), *self._out.values()):
            writer.flush()

    def close(self) -> None:
        for writer in (*self._in.values(), *self._out.values()):
            writer.close()
