"""PAUSE frames: IEEE 802.3 MAC control (EtherType 0x8808), the link-level flow control
that a switch's MAC and a NIC exchange, never the forwarding pipeline's business.

Two opcodes are understood:

* ``0x0101`` priority-based flow control (IEEE 802.1Qbb, "PFC"): a class-enable vector
  (bit p: the frame speaks for priority p) and eight 16-bit pause times, one per
  priority;
* ``0x0001`` the classic 802.3x PAUSE: one pause time for the whole link (every
  priority).

A pause time counts *quanta* of 512 bit times at the receiving port's speed; 0 means
"resume now". The frame goes to the reserved multicast address 01:80:C2:00:00:01, which
bridges never forward, and is padded to Ethernet's 60-byte minimum (the FCS is the
NIC's). Scapy's ``scapy.contrib.mac_control`` decodes what `pfc_frame` builds (tests
check it).

Both the switch (p4sim/switch/pfc.py) and the TCCL agents' NICs (tccl/engine.py) import
this module: it owns the layout.
"""

from __future__ import annotations

import struct

ETHERTYPE_MAC_CONTROL = 0x8808
OPCODE_PAUSE = 0x0001
OPCODE_PFC = 0x0101
PAUSE_DST_MAC = bytes.fromhex("0180c2000001")
PRIORITIES = 8
# The longest pause a frame can ask for; a sender of XOFF asks for it and refreshes it
# before it runs out (pfc.py), as switches do.
MAX_QUANTA = 0xFFFF
QUANTUM_BITS = 512
MIN_FRAME = 60   # Ethernet's minimum frame without the FCS

_HEAD = struct.Struct("!6s6sHH")          # dst, src, EtherType, opcode
_PFC_BODY = struct.Struct(f"!H{PRIORITIES}H")  # class-enable vector, pause times
_PAUSE_BODY = struct.Struct("!H")          # pause time
_ETHERTYPE_AT = 12


def pfc_frame(src_mac: bytes, quanta: dict[int, int]) -> bytes:
    """A PFC frame from ``src_mac`` asking, for each priority in ``quanta``, a pause of
    that many quanta (0: resume). Priorities left out are not enabled in the vector."""
    vector, times = 0, [0] * PRIORITIES
    for priority, q in quanta.items():
        if not 0 <= priority < PRIORITIES:
            raise ValueError(f"PFC priority must be 0..{PRIORITIES - 1}, got {priority}")
        if not 0 <= q <= MAX_QUANTA:
            raise ValueError(f"PFC pause time must be 0..{MAX_QUANTA} quanta, got {q}")
        vector |= 1 << priority
        times[priority] = q
    frame = _HEAD.pack(PAUSE_DST_MAC, src_mac, ETHERTYPE_MAC_CONTROL, OPCODE_PFC) + \
        _PFC_BODY.pack(vector, *times)
    return frame.ljust(MIN_FRAME, b"\0")


def is_mac_control(frame: bytes) -> bool:
    """Whether ``frame`` is a MAC control frame (consumed by the MAC, never forwarded)."""
    return len(frame) >= 14 and frame[_ETHERTYPE_AT] == 0x88 and frame[_ETHERTYPE_AT + 1] == 0x08


def parse_pause(frame: bytes) -> dict[int, int] | None:
    """The pause times a MAC control frame asks for, priority -> quanta (a classic PAUSE
    speaks for every priority); None for another opcode or a frame cut short."""
    if not is_mac_control(frame) or len(frame) < _HEAD.size + _PAUSE_BODY.size:
        return None
    opcode = _HEAD.unpack_from(frame)[3]
    if opcode == OPCODE_PAUSE:
        (q,) = _PAUSE_BODY.unpack_from(frame, _HEAD.size)
        return {p: q for p in range(PRIORITIES)}
    if opcode == OPCODE_PFC and len(frame) >= _HEAD.size + _PFC_BODY.size:
        vector, *times = _PFC_BODY.unpack_from(frame, _HEAD.size)
        return {p: times[p] for p in range(PRIORITIES) if vector >> p & 1}
    return None


def quanta_seconds(quanta: int, bits_per_s: float) -> float:
    """How long ``quanta`` pause quanta last on a link of ``bits_per_s``."""
    return quanta * QUANTUM_BITS / bits_per_s
