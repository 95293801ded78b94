"""Reading classic pcap files fast: record by record, with struct, no packet objects.

Scapy's ``rdpcap`` builds a packet object per record (~50 us each); a run's captures
hold millions of records, so the inspection reads the format itself (the one
``p4sim.switch.pcap`` and BMv2 write: a 24-byte global header, then a 16-byte header
per record). Both byte orders and both timestamp resolutions (us, ns) are accepted.

A capture cut short (a switch killed mid-write) ends at its last whole record and is
reported as truncated; a file that is not a pcap is a `PcapError` naming it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

# Magic numbers as read little-endian: microsecond and nanosecond pcap, either order.
_MAGICS = {0xA1B2C3D4: ("<", 1e-6), 0xD4C3B2A1: (">", 1e-6),
           0xA1B23C4D: ("<", 1e-9), 0x4D3CB2A1: (">", 1e-9)}
LINKTYPE_ETHERNET = 1
# Larger than any snap length a switch writes (65535); a record claiming more than this
# is a corrupt file, not a big packet.
MAX_RECORD = 262144


class PcapError(ValueError):
    """A file that cannot be read as an Ethernet pcap; the message names it."""


@dataclass
class PcapInfo:
    """What reading one file found besides its records."""

    path: Path
    records: int = 0
    truncated: bool = False
    problems: list[str] = field(default_factory=list)


def read_records(path: str | Path, info: PcapInfo | None = None) -> Iterator[tuple[float, bytes]]:
    """Yield (timestamp in seconds since the epoch, frame bytes) of every record.

    ``info`` (if given) is filled in while reading: record count and truncation.
    """
    path = Path(path)
    info = info if info is not None else PcapInfo(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PcapError(f"{path}: cannot read: {e.strerror}") from e
    if len(data) < 24:
        if data:
            info.truncated = True
            info.problems.append(f"{path.name}: {len(data)} bytes, shorter than a pcap header")
        return
    magic = struct.unpack_from("<I", data)[0]
    if magic not in _MAGICS:
        raise PcapError(f"{path}: not a pcap file (magic 0x{magic:08x})")
    order, unit = _MAGICS[magic]
    linktype = struct.unpack_from(order + "I", data, 20)[0] & 0x0FFFFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise PcapError(f"{path}: link type {linktype}, only Ethernet (1) is understood")
    record = struct.Struct(order + "IIII")
    offset, end = 24, len(data)
    while offset < end:
        if offset + 16 > end:
            info.truncated = True
            info.problems.append(f"{path.name}: ends inside a record header at byte {offset}")
            return
        sec, frac, caplen, _ = record.unpack_from(data, offset)
        if caplen > MAX_RECORD:
            info.truncated = True
            info.problems.append(f"{path.name}: corrupt record at byte {offset} (length {caplen}); "
                                 f"the rest of the file is ignored")
            return
        start = offset + 16
        offset = start + caplen
        if offset > end:
            info.truncated = True
            info.problems.append(f"{path.name}: last record cut short at byte {start}")
            return
        info.records += 1
        yield sec + frac * unit, data[start:offset]


def first_timestamp(path: str | Path) -> float | None:
    """The timestamp of the first record (None for an empty capture): a switch writes
    its records in time order, so the earliest of these is the run's first frame."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(40)
    except OSError as e:
        raise PcapError(f"{path}: cannot read: {e.strerror}") from e
    if len(head) < 40:
        return None
    magic = struct.unpack_from("<I", head)[0]
    if magic not in _MAGICS:
        raise PcapError(f"{path}: not a pcap file (magic 0x{magic:08x})")
    order, unit = _MAGICS[magic]
    sec, frac = struct.unpack_from(order + "II", head, 24)
    return sec + frac * unit
