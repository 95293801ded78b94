"""Flows rebuilt from captures: counters per observation point, PSN analysis, paths.

A *row* of the flow table is one 5-tuple plus the RoCEv2 destination QP (QPN; -1 for
traffic that is not RoCEv2). A queue pair whose source port was moved (GOR) is one
*connection* (source, destination, QPN) with one row per source port.

Where each number is taken:

* sent packets/bytes and retransmits: where the frame enters the fabric (the leaf's
  ingress from the sending host); a retransmit is a data PSN not beyond the highest
  PSN the connection has sent (go-back-N resends);
* delivered packets/bytes, CE marks and PSN gaps: where it leaves the fabric (the
  leaf's egress to the receiving host); a gap is a data PSN beyond the next expected;
* CNPs: the receiver's CNPs (BTH opcode 0x81, travelling the other way) as they enter
  the fabric, credited to the row that was sending when they were sent;
* the path: every directed link on which the row's frames were seen, followed from
  the sending host to the receiving host; a hop's CE marks are CE frames out of the
  switch minus CE frames into it (a switch marks, never unmarks).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterator

from insight.captures import IN, OUT, Point
from insight.frames import ACK_OPCODES, psn_after
from topo.frames import Packet
from topo.headers import CNP, ECN_CE

RowKey = tuple[str, str, int, int, int, int]     # src, dst, proto, sport, dport, qpn
ConnKey = tuple[str, str, int]                   # src, dst, qpn

# A path longer than this many switches is a loop in the captures, not a path.
MAX_PATH_SWITCHES = 8


@dataclass
class PointCount:
    packets: int = 0
    bytes: int = 0
    ce: int = 0


@dataclass
class Row:
    """Everything counted for one row while the captures are read."""

    key: RowKey
    sent_packets: int = 0
    sent_bytes: int = 0
    delivered_packets: int = 0
    delivered_bytes: int = 0
    retransmits: int = 0
    psn_gaps: int = 0
    psn_missing: int = 0
    ce_marked: int = 0
    cnps: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    # Per observation point, by its index in the capture set's point list.
    at: dict[int, PointCount] = field(default_factory=lambda: defaultdict(PointCount))
    sent_bins: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    delivered_bins: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def conn(self) -> ConnKey:
        return self.key[0], self.key[1], self.key[5]

    def seen(self, ts: float) -> None:
        if self.first_ts is None or ts < self.first_ts:
            self.first_ts = ts
        if self.last_ts is None or ts > self.last_ts:
            self.last_ts = ts


@dataclass
class _Psn:
    """Per-connection PSN state at the entry and at the exit of the fabric."""

    sent_max: int | None = None
    delivered_max: int | None = None


def tccl_data_qpn(cnp_qpn: int) -> int | None:
    """The QPN of the data a CNP answers for, by TCCL's numbering: QPs are
    ``1<<20 | local<<10 | peer`` (tccl.job.qpn), so rank a's data to rank b carries b's
    QPN and b's CNPs carry a's. None for a QPN not numbered that way."""
    from tccl.job import qpn, qpn_ranks
    ranks = qpn_ranks(cnp_qpn)
    if ranks is None:
        return None
    local, peer = ranks
    return qpn(peer, local)


class FlowTable:
    """Accumulates rows from (point, timestamp, packet) observations."""

    def __init__(self, t0: float, bin_s: float) -> None:
        self.t0, self.bin_s = t0, bin_s
        self.rows: dict[RowKey, Row] = {}
        self._psn: dict[ConnKey, _Psn] = defaultdict(_Psn)
        # CNPs as they entered the fabric: (cnp src, cnp dst, qpn it carries) -> times.
        self.cnp_times: dict[ConnKey, list[float]] = defaultdict(list)
        self.unattributed_cnps = 0

    def add(self, point: int, injection: bool, delivery: bool, ts: float, pkt: Packet) -> None:
        """Count one frame seen at point number ``point``; ``injection``/``delivery``:
        the point is where frames from a host enter / to a host leave the fabric."""
        if pkt.opcode == CNP:
            if injection:
                self.cnp_times[(pkt.src, pkt.dst, pkt.dqpn)].append(ts)
            return
        if pkt.opcode in ACK_OPCODES:
            return
        key = (pkt.src, pkt.dst, pkt.proto, pkt.sport, pkt.dport, pkt.dqpn)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = Row(key)
        count = row.at[point]
        count.packets += 1
        count.bytes += pkt.length
        ce = pkt.ecn == ECN_CE
        if ce:
            count.ce += 1
        if injection:
            row.sent_packets += 1
            row.sent_bytes += pkt.length
            row.sent_bins[int((ts - self.t0) / self.bin_s)] += pkt.length
            row.seen(ts)
            if pkt.psn >= 0:
                state = self._psn[row.conn]
                if state.sent_max is None or psn_after(pkt.psn, state.sent_max):
                    state.sent_max = pkt.psn
                else:
                    row.retransmits += 1
        if delivery:
            row.delivered_packets += 1
            row.delivered_bytes += pkt.length
            row.delivered_bins[int((ts - self.t0) / self.bin_s)] += pkt.length
            row.seen(ts)
            if ce:
                row.ce_marked += 1
            if pkt.psn >= 0:
                state = self._psn[row.conn]
                if state.delivered_max is None:
                    state.delivered_max = pkt.psn
                elif psn_after(pkt.psn, state.delivered_max):
                    missing = (pkt.psn - state.delivered_max - 1) % (1 << 24)
                    if missing:
                        row.psn_gaps += 1
                        row.psn_missing += missing
                    state.delivered_max = pkt.psn
        if not injection and not delivery:
            row.seen(ts)

    def attribute_cnps(self, data_qpn_of: Callable[[int], int | None] = tccl_data_qpn) -> None:
        """Credit every CNP to the row of the reverse connection that was sending when
        it entered the fabric; when several connections share the address pair,
        ``data_qpn_of`` (CNP QPN -> data QPN) settles which."""
        by_pair: dict[tuple[str, str], dict[int, list[Row]]] = defaultdict(lambda: defaultdict(list))
        for row in self.rows.values():
            if row.key[5] >= 0:
                by_pair[(row.key[0], row.key[1])][row.key[5]].append(row)
        for (src, dst, qpn), times in self.cnp_times.items():
            conns = by_pair.get((dst, src), {})
            target = next(iter(conns)) if len(conns) == 1 else data_qpn_of(qpn)
            rows = conns.get(target) if target is not None else None
            if not rows:
                self.unattributed_cnps += len(times)
                continue
            ordered = sorted(rows, key=lambda r: r.first_ts if r.first_ts is not None else 0.0)
            for t in times:
                owner = ordered[0]
                for row in ordered:
                    if row.first_ts is not None and row.first_ts <= t:
                        owner = row
                owner.cnps += 1


@dataclass(frozen=True)
class Hop:
    """One switch on a path: in and out port and what the captures saw there."""

    switch: str
    in_port: int
    out_port: int
    packets_in: int
    packets_out: int
    ce_in: int
    ce_out: int

    @property
    def marked(self) -> int:
        """CE marks this switch added (its egress CE frames minus its ingress ones)."""
        return max(0, self.ce_out - self.ce_in)


@dataclass(frozen=True)
class Path:
    nodes: tuple[str, ...]
    hops: tuple[Hop, ...]
    packets: int


def paths_of(row: Row, points: list[Point], ports: dict[tuple[str, str], tuple[int, int]],
             servers: set[str]) -> list[Path]:
    """Every host-to-host path the row's frames took, most packets first.

    ``points``: the observation points by number; ``ports``: (a, b) -> (a's port, b's
    port) of every cable in both orientations; ``servers``: the host names (where paths
    start and end).
    """
    edges: dict[tuple[str, str], int] = defaultdict(int)
    seen = {points[i]: c for i, c in row.at.items()}
    for point, count in seen.items():
        edges[(point.src, point.dst)] = max(edges[(point.src, point.dst)], count.packets)
    out: dict[str, list[str]] = defaultdict(list)
    for (a, b), n in edges.items():
        if n:
            out[a].append(b)
    counts = {(p.switch, p.port, p.direction): c for p, c in seen.items()}

    def hop(prev: str, sw: str, nxt: str) -> Hop:
        in_port, out_port = ports[(sw, prev)][0], ports[(sw, nxt)][0]
        cin = counts.get((sw, in_port, IN))
        cout = counts.get((sw, out_port, OUT))
        return Hop(sw, in_port, out_port, cin.packets if cin else 0, cout.packets if cout else 0,
                   cin.ce if cin else 0, cout.ce if cout else 0)

    def walk(nodes: list[str]) -> Iterator[list[str]]:
        here = nodes[-1]
        for nxt in sorted(out.get(here, ())):
            if nxt in servers:
                yield nodes + [nxt]
            elif nxt not in nodes and len(nodes) <= MAX_PATH_SWITCHES:
                yield from walk(nodes + [nxt])

    found = []
    for start in sorted(a for a in out if a in servers):
        for nodes in walk([start]):
            n = min(edges[(a, b)] for a, b in zip(nodes, nodes[1:]))
            hops = tuple(hop(nodes[i - 1], nodes[i], nodes[i + 1]) for i in range(1, len(nodes) - 1))
            found.append(Path(tuple(nodes), hops, n))
    return sorted(found, key=lambda p: -p.packets)
