"""Stateful v1model externs with BMv2's semantics: counters, meters, registers,
parser value sets, plus the packet replication engine and mirroring sessions.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import BadIndex, BadMatch, DuplicateEntry, InUse, NoSuchEntry, StateError
from .tables import HandleAllocator


class CounterArray:
    """Packet and byte counts per index (BMv2 counts the packet's ingress length)."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.packets = [0] * size
        self.bytes = [0] * size

    def check(self, index: int) -> None:
        """BadIndex unless `index` is a cell."""
        if not 0 <= index < self.size:
            raise BadIndex(f"counter {self.name!r}: index {index} outside 0..{self.size - 1}")

    def reset(self) -> None:
        """Zero all cells."""
        for i in range(self.size):
            self.packets[i] = 0
            self.bytes[i] = 0


class Meter:
    """One BMv2 meter: token buckets checked from the highest rate down.

    For the usual two-rate three-color meter the rates are given as
    `[(CIR, CBS), (PIR, PBS)]` (rate in bytes or packets per microsecond); the result
    is 0 (green), 1 (yellow) or 2 (red). An unconfigured meter always says green.
    """

    __slots__ = ("packets", "rate_count", "clock", "t0", "rates", "configured")

    def __init__(self, packets: bool, rate_count: int, clock: Callable[[], int]) -> None:
        self.packets = packets
        self.rate_count = rate_count
        self.clock = clock
        self.t0 = clock()
        self.rates: list[list] = []
        self.configured = False

    def set_rates(self, rates: list[tuple[float, int]], where: str) -> None:
        """Configure the buckets from [(CIR, CBS), (PIR, PBS)] (BMv2 order)."""
        if len(rates) != self.rate_count:
            raise StateError(f"{where}: expected {self.rate_count} (rate, burst) pairs, "
                             f"got {len(rates)}")
        for i in range(1, len(rates)):
            if rates[i - 1][0] > rates[i][0]:
                raise StateError(f"{where}: rates must be given in increasing order "
                                 f"(committed before peak)")
        for rate, burst in rates:
            if rate < 0 or burst < 0:
                raise StateError(f"{where}: rates and bursts must be non-negative")
        built = [[float(r), int(b), int(b), 0, i + 1] for i, (r, b) in enumerate(rates)]
        built.reverse()
        self.rates = built
        self.configured = True

    def unset(self) -> None:
        """Back to unconfigured (always green), as before any `set_rates`."""
        self.rates = []
        self.configured = False

    def execute(self, nbytes: int) -> int:
        """Color of a packet of `nbytes` bytes now (0 green, 1 yellow, 2 red)."""
        if not self.configured:
            return 0
        micros = self.clock() - self.t0
        need = 1 if self.packets else nbytes
        for r in self.rates:
            since = int(micros * r[0])
            new = since - r[3]
            r[3] = since
            r[2] = min(r[2] + new, r[1])
            if r[2] < need:
                return r[4]
            r[2] -= need
        return 0


class MeterArray:
    """An indexed array of meters (`meter` extern)."""

    def __init__(self, name: str, size: int, packets: bool, rate_count: int,
                 clock: Callable[[], int]) -> None:
        self.name = name
        self.size = size
        self.meters = [Meter(packets, rate_count, clock) for _ in range(size)]

    def execute(self, index: int, nbytes: int) -> int | None:
        """Color for the packet, or None for an out-of-range index (BMv2 then skips)."""
        if 0 <= index < self.size:
            return self.meters[index].execute(nbytes)
        return None

    def check(self, index: int) -> None:
        """BadIndex unless `index` is a cell."""
        if not 0 <= index < self.size:
            raise BadIndex(f"meter {self.name!r}: index {index} outside 0..{self.size - 1}")


class RegisterArray:
    """`register` extern: `values` is the list generated code indexes directly."""

    def __init__(self, name: str, size: int, bitwidth: int) -> None:
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        self.values = [0] * size

    def check(self, index: int) -> None:
        """BadIndex unless `index` is a cell."""
        if not 0 <= index < self.size:
            raise BadIndex(f"register {self.name!r}: index {index} outside 0..{self.size - 1}")


class ValueSet:
    """A parser value set; values are stored byte-padded per key field, like BMv2."""

    def __init__(self, name: str, bitwidth: int, key_widths: list[int]) -> None:
        self.name = name
        self.bitwidth = bitwidth
        self.key_widths = key_widths or [bitwidth]
        self.exact: set[int] = set()
        self.masked: list[tuple[int, int]] = []

    def _pad(self, value: int) -> int:
        """Compressed (fields back to back) -> byte-padded per field."""
        out = 0
        rest = sum(self.key_widths)
        for w in self.key_widths:
            rest -= w
            part = (value >> rest) & ((1 << w) - 1)
            out = (out << (((w + 7) // 8) * 8)) | part
        return out

    def add(self, value: int, mask: int | None) -> None:
        """Add a compressed value, optionally with its own mask."""
        full = (1 << self.bitwidth) - 1
        if value < 0 or value > full or (mask is not None and not 0 <= mask <= full):
            raise BadMatch(f"value set {self.name!r}: value/mask wider than "
                           f"{self.bitwidth} bits")
        if mask is None or mask == full:
            self.exact.add(self._pad(value))
        else:
            pm = self._pad(mask)
            self.masked.append((self._pad(value) & pm, pm))

    def clear(self) -> None:
        """Remove every value."""
        self.exact.clear()
        self.masked.clear()

    def match(self, key: int) -> bool:
        """Whether the byte-padded key is in the set."""
        if key in self.exact:
            return True
        return any(key & pm == pv for pv, pm in self.masked)

    def match_masked(self, key: int, mask: int) -> bool:
        """Match under a transition mask: BMv2 masks both the key and every value."""
        key &= mask
        return (any(v & mask == key for v in self.exact)
                or any(key & pm == pv & mask for pv, pm in self.masked))


class Replication:
    """BMv2's simple PRE (multicast groups of (rid, ports) nodes) and mirror sessions."""

    def __init__(self) -> None:
        self.groups: dict[int, list[int]] = {}
        self.nodes: dict[int, tuple[int, list[int]]] = {}
        self.node_group: dict[int, int] = {}
        self.sessions: dict[int, tuple[int | None, int | None]] = {}
        self._node_h = HandleAllocator()

    def mgrp_create(self, mgrp: int) -> None:
        """New empty multicast group."""
        if mgrp in self.groups:
            raise DuplicateEntry(f"multicast group {mgrp} already exists")
        self.groups[mgrp] = []

    def mgrp_destroy(self, mgrp: int) -> None:
        """Delete a group; its nodes become unassociated."""
        if mgrp not in self.groups:
            raise NoSuchEntry(f"no multicast group {mgrp}")
        for node in self.groups.pop(mgrp):
            del self.node_group[node]

    def node_create(self, rid: int, ports: list[int]) -> int:
        """New node (rid, ports); returns its handle."""
        ports = self._ports(ports)
        handle = self._node_h.take()
        self.nodes[handle] = (rid, ports)
        return handle

    @staticmethod
    def _ports(ports: list[int]) -> list[int]:
        for p in ports:
            if not isinstance(p, int) or p < 0:
                raise StateError(f"bad port {p!r} in multicast node")
        return sorted(set(ports))

    def _node(self, handle: int) -> tuple[int, list[int]]:
        if handle not in self.nodes:
            raise NoSuchEntry(f"no multicast node with handle {handle}")
        return self.nodes[handle]

    def node_update(self, handle: int, ports: list[int]) -> None:
        """Replace a node's ports."""
        rid, _old = self._node(handle)
        self.nodes[handle] = (rid, self._ports(ports))

    def node_destroy(self, handle: int) -> None:
        """Delete a node, dissociating it first."""
        self._node(handle)
        grp = self.node_group.pop(handle, None)
        if grp is not None:
            self.groups[grp].remove(handle)
        del self.nodes[handle]
        self._node_h.release(handle)

    def associate(self, mgrp: int, handle: int) -> None:
        """Append node `handle` to group `mgrp`."""
        if mgrp not in self.groups:
            raise NoSuchEntry(f"no multicast group {mgrp}")
        self._node(handle)
        if handle in self.node_group:
            raise InUse(f"multicast node {handle} is already associated with group "
                        f"{self.node_group[handle]}")
        self.groups[mgrp].append(handle)
        self.node_group[handle] = mgrp

    def dissociate(self, mgrp: int, handle: int) -> None:
        """Remove node `handle` from group `mgrp`."""
        if mgrp not in self.groups:
            raise NoSuchEntry(f"no multicast group {mgrp}")
        if self.node_group.get(handle) != mgrp:
            raise NoSuchEntry(f"multicast node {handle} is not associated with group {mgrp}")
        self.groups[mgrp].remove(handle)
        del self.node_group[handle]

    def replicate(self, mgrp: int) -> list[tuple[int, int]]:
        """(egress port, rid) copies for a group: nodes in association order, ports ascending."""
        out = []
        for handle in self.groups.get(mgrp, ()):
            rid, ports = self.nodes[handle]
            for port in ports:
                out.append((port, rid))
        return out
