"""Telemetry: per-port counters of every switch, read over P4Runtime each interval and
turned into per-link rates.

What one poll reads from each switch (one ReadRequest, then one register reset):

* ``tx_port_counter`` (packets, bytes per egress port): the load of the link leaving
  the port; ``rx_port_counter`` of a leaf's NIC-facing ports gives the NIC -> leaf
  direction, which no switch transmits;
* ``ecn_marked_counter``: packets the port's queue marked CE;
* ``max_qdepth`` register: the deepest the port's queue got since the last poll --
  read, then written back to 0 (a packet between the two is not seen; the next
  packet of a congested queue sees the same depth);
* p4sim's QueueControl ``GetQueueStats`` (when the switch serves it): tail drops and
  the PFC counters (PAUSE frames, paused time, watchdog storms), at most every
  ``DROPS_EVERY_S``. A link's ``pauses`` are the PAUSE frames its receiving end sent
  back (counted where a switch is at either end) and ``paused_s`` how long the sending
  switch's queues stood paused by them.

A link is directed: (from node, to node). Counters that go backwards (a switch that
restarted) count from zero.

`Telemetry.port_bytes` reads one port's transmit counter alone: what GOR's probe of an
alarmed link needs (two such reads ~50 ms apart give its utilisation without a round of
every switch).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import finsy as fy
import grpc

from controller.paths import LinkId
from controller.switches import SwitchFleet
from p4sim.runtime.queues import QueueControlClient, fidelity_of
from topo.addressing import AddressPlan

LOG = logging.getLogger("controller.telemetry")
N = TypeVar("N", int, float)   # a cumulative counter


# Tail drops are read this often (s), not every poll: each read is one more RPC the
# busy switch process serves, and drops are rare and only displayed. A link's `drops`
# is what the last reading found (drops over up to this long), until the next one.
DROPS_EVERY_S = 1.0
# One switch's counter read may take this long (s) before the poll goes on without it:
# ten slow switches must still fit in the poll's 10 s.
READ_TIMEOUT_S = 0.8


@dataclass(frozen=True)
class LinkStats:
    """One link over one interval."""

    link: LinkId
    capacity_bps: float
    seconds: float          # the interval's length
    bps: float
    pps: float
    packets: int
    ecn_marked: int
    queue_depth: int
    drops: int
    pauses: int = 0
    paused_s: float = 0.0

    @property
    def util(self) -> float:
        return self.bps / self.capacity_bps if self.capacity_bps else 0.0

    @property
    def ecn_fraction(self) -> float:
        return self.ecn_marked / self.packets if self.packets else 0.0


@dataclass
class Snapshot:
    """Cumulative counters of one switch at one time (port -> value)."""

    time: float
    drops_read: bool = False      # `drops` read now, not carried over from the last reading
    tx_packets: dict[int, int] = field(default_factory=dict)
    tx_bytes: dict[int, int] = field(default_factory=dict)
    rx_packets: dict[int, int] = field(default_factory=dict)
    rx_bytes: dict[int, int] = field(default_factory=dict)
    ecn: dict[int, int] = field(default_factory=dict)
    drops: dict[int, int] = field(default_factory=dict)
    # PFC, cumulative per port: PAUSE frames sent and received, paused seconds, storms
    pfc: dict[int, "PfcCounters"] = field(default_factory=dict)
    max_qdepth: dict[int, int] = field(default_factory=dict)   # since the last poll, not cumulative


@dataclass(frozen=True)
class PfcCounters:
    """A switch port's cumulative PFC counters (summed over priorities)."""

    pause_tx: int = 0
    pause_rx: int = 0
    paused_s: float = 0.0
    storms: int = 0

    @classmethod
    def of(cls, stats: dict) -> "PfcCounters":
        pfc = stats.get("pfc") or {}
        return cls(int(sum(pfc.get("pause_tx", ()))), int(sum(pfc.get("pause_rx", ()))),
                   float(sum(pfc.get("paused_s", ()))), int(pfc.get("storms", 0)))


def _delta(new: N, old: N | None) -> N:
    return new if old is None or new < old else new - old


class LinkMap:
    """Which directed link each switch port's counters describe."""

    def __init__(self, plan: AddressPlan) -> None:
        self.tx: dict[tuple[str, int], LinkId] = {}
        self.rx: dict[tuple[str, int], LinkId] = {}
        self.capacity: dict[LinkId, float] = {}
        for link in plan.links:
            bps = link.mbps * 1e6
            for (a, a_port), (b, _) in (((link.a, link.a_port), (link.b, link.b_port)),
                                         ((link.b, link.b_port), (link.a, link.a_port))):
                self.capacity[(a, b)] = bps
                if plan_has_switch(plan, a):
                    self.tx[(a, a_port)] = (a, b)
                    if not plan_has_switch(plan, b):
                        self.rx[(a, a_port)] = (b, a)

    def port_of(self, link: LinkId) -> tuple[str, int]:
        """(switch, egress port) whose counters carry ``link``'s transmit side."""
        for key, value in self.tx.items():
            if value == link:
                return key
        raise KeyError(f"{'->'.join(link)} is not transmitted by any switch port")


def plan_has_switch(plan: AddressPlan, name: str) -> bool:
    try:
        plan.switch(name)
        return True
    except KeyError:
        return False


def link_stats(links: LinkMap, old: dict[str, Snapshot], new: dict[str, Snapshot]) -> dict[LinkId, LinkStats]:
    """Per-link stats between two polls (switches missing from either are skipped)."""
    out: dict[LinkId, LinkStats] = {}
    for (switch, port), link in links.tx.items():
        a, b = old.get(switch), new.get(switch)
        if a is None or b is None or b.time <= a.time or port not in b.tx_packets:
            continue
        dt = b.time - a.time
        packets = _delta(b.tx_packets[port], a.tx_packets.get(port))
        nbytes = _delta(b.tx_bytes.get(port, 0), a.tx_bytes.get(port))
        pa, pb = a.pfc.get(port), b.pfc.get(port, PfcCounters())
        out[link] = LinkStats(link, links.capacity[link], dt, nbytes * 8 / dt, packets / dt, packets,
                              min(packets, _delta(b.ecn.get(port, 0), a.ecn.get(port))),
                              b.max_qdepth.get(port, 0), _delta(b.drops.get(port, 0), a.drops.get(port)),
                              _delta(pb.pause_rx, pa.pause_rx if pa else None),
                              _delta(pb.paused_s, pa.paused_s if pa else None))
    for (switch, port), link in links.rx.items():
        a, b = old.get(switch), new.get(switch)
        if a is None or b is None or b.time <= a.time or port not in b.rx_packets:
            continue
        dt = b.time - a.time
        packets = _delta(b.rx_packets[port], a.rx_packets.get(port))
        nbytes = _delta(b.rx_bytes.get(port, 0), a.rx_bytes.get(port))
        pa, pb = a.pfc.get(port), b.pfc.get(port, PfcCounters())
        # NIC -> leaf: the leaf's PAUSE frames to the NIC (the NIC's paused time is its own).
        out[link] = LinkStats(link, links.capacity[link], dt, nbytes * 8 / dt, packets / dt, packets, 0, 0, 0,
                              _delta(pb.pause_tx, pa.pause_tx if pa else None))
    return out


class Telemetry:
    """Polls every switch of a fleet; `poll` returns the links' stats since the last one."""

    def __init__(self, plan: AddressPlan, fleet: SwitchFleet, queue_stats: bool = True) -> None:
        self.plan = plan
        self.fleet = fleet
        self.links = LinkMap(plan)
        self._last: dict[str, Snapshot] = {}
        self._queues: dict[str, QueueControlClient] = {}
        self._channels: list[grpc.Channel] = []
        if queue_stats:
            for sw in plan.switches:
                channel = grpc.insecure_channel(sw.grpc_address)
                self._channels.append(channel)
                self._queues[sw.name] = QueueControlClient(channel, timeout=2.0)
        self.latest: dict[LinkId, LinkStats] = {}
        self._drops_at = -DROPS_EVERY_S
        self._recent_drops: dict[LinkId, tuple[int, int, float]] = {}   # drops, pauses, paused_s
        # PFC watchdog trips seen since GOR last took them: (switch, port, how many).
        self.storms: list[tuple[str, int, int]] = []
        # The switch whose counters give each link's stats.
        self._sender = {link: switch for (switch, _), link in [*self.links.tx.items(), *self.links.rx.items()]}
        # Only the cells of ports with a link: a wildcard read answers every one of the
        # program's 64 ports and costs the switch twice the time (measured).
        self._requests: dict[str, list] = {}
        for sw in plan.switches:
            tx = sorted(p for (name, p) in self.links.tx if name == sw.name)
            rx = sorted(p for (name, p) in self.links.rx if name == sw.name)
            self._requests[sw.name] = [
                *(fy.P4CounterEntry(c, index=p) for c in ("tx_port_counter", "ecn_marked_counter") for p in tx),
                *(fy.P4CounterEntry("rx_port_counter", index=p) for p in rx),
                *(fy.P4RegisterEntry("max_qdepth", index=p) for p in tx)]

    @property
    def queue_clients(self) -> dict[str, QueueControlClient]:
        """The QueueControl client of every switch (by name), which other readers of
        the switches' own reports (`controller.cables.PortReader`) share."""
        return self._queues

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    async def _snapshots(self, clock: Callable[[], float]) -> dict[str, Snapshot]:
        names = [sw.name for sw in self.plan.switches]
        drops: asyncio.Future[list[dict[int, tuple[int, PfcCounters]] | None]] | None = None
        if clock() - self._drops_at >= DROPS_EVERY_S:
            self._drops_at = clock()
            # Once a second, all at once: each call is bounded by the client's timeout.
            drops = asyncio.gather(*(asyncio.to_thread(self._queue_counters, n) for n in names))
        replies = {}
        # One switch after the other, not all at once: ten switch processes answering
        # together on two cores stall every forwarding loop of the fabric for
        # milliseconds, and the queues that builds look like congestion (ECN marks).
        for name in names:
            # A switch process on a busy CPU may answer late: its counters are dated
            # midway between asking and the answer.
            sent = clock()
            try:
                reply = (await asyncio.wait_for(self.fleet.read_many({name: self._requests[name]}),
                                                READ_TIMEOUT_S))[name]
            except asyncio.TimeoutError:
                LOG.debug("%s: no counters within %.1f s; left out of this poll", name, READ_TIMEOUT_S)
                continue
            if not reply:
                continue
            replies[name] = ((sent + clock()) / 2, reply)
            try:
                await self.fleet.switches[name].write([~fy.P4RegisterEntry("max_qdepth", data=0)])
            except Exception as e:  # noqa: BLE001 -- the next poll reads a longer maximum
                LOG.debug("%s: max_qdepth reset failed: %r", name, e)
        read = dict(zip(names, await drops)) if drops is not None else {}
        snaps = {}
        for name, (when, reply) in replies.items():
            drop = read.get(name)
            if drop is None:  # not read now, or unreadable: the cumulative counts of the last reading
                last = self._last.get(name)
                snap = Snapshot(when, drops=last.drops if last else {}, pfc=last.pfc if last else {})
            else:
                snap = Snapshot(when, drops_read=True, drops={p: d for p, (d, _) in drop.items()},
                                pfc={p: pfc for p, (_, pfc) in drop.items()})
            for e in reply:
                if isinstance(e, fy.P4CounterEntry) and e.data is not None and e.index is not None:
                    if e.counter_id == "tx_port_counter":
                        snap.tx_packets[e.index], snap.tx_bytes[e.index] = e.data.packet_count, e.data.byte_count
                    elif e.counter_id == "rx_port_counter":
                        snap.rx_packets[e.index], snap.rx_bytes[e.index] = e.data.packet_count, e.data.byte_count
                    elif e.counter_id == "ecn_marked_counter":
                        snap.ecn[e.index] = e.data.packet_count
                elif isinstance(e, fy.P4RegisterEntry) and e.index is not None:
                    snap.max_qdepth[e.index] = int(e.data or 0)
            snaps[name] = snap
        return snaps

    def _queue_counters(self, name: str) -> dict[int, tuple[int, PfcCounters]] | None:
        """Cumulative tail drops and PFC counters per port; None when the switch serves
        no QueueControl or does not answer (not "no drops": the last reading stays the
        base)."""
        client = self._queues.get(name)
        if client is None:
            return None
        try:
            return {port: (int(s.get("drops", 0)), PfcCounters.of(s)) for port, s in client.queue_stats().items()}
        except grpc.RpcError:
            return None

    def fidelity(self) -> dict[str, dict]:
        """Every switch's cumulative fidelity counters (QueueControl GetFidelity; a switch
        that does not answer is left out): what the prompt's `fidelity` shows."""
        return fidelity_of(self._queues)

    def port_bytes(self, switch: str, port: int, clock: Callable[[], float]) -> tuple[float, int]:
        """(time, cumulative bytes) of ``switch``'s transmit counter at ``port``: one
        ReadRequest of one cell, dated midway between asking and the answer (as a poll
        dates a switch's counters). Raises TimeoutError when the switch does not answer
        within `READ_TIMEOUT_S`, LookupError when its answer lacks the cell."""
        async def read() -> tuple[float, list]:
            sent = clock()
            reply = await asyncio.wait_for(
                self.fleet.read_many({switch: [fy.P4CounterEntry("tx_port_counter", index=port)]}), READ_TIMEOUT_S)
            return (sent + clock()) / 2, reply[switch]

        when, reply = self.fleet.run(read(), timeout=READ_TIMEOUT_S + 1.0)
        for e in reply:
            if isinstance(e, fy.P4CounterEntry) and e.index == port and e.data is not None:
                return when, int(e.data.byte_count)
        raise LookupError(f"{switch}: no tx_port_counter[{port}] in its answer (switch down?)")

    def poll(self, clock: Callable[[], float], min_interval: float = 0.0) -> dict[LinkId, LinkStats]:
        """Read every switch now; returns per-link stats since the previous poll (empty
        on the first). A switch read less than ``min_interval`` after its previous
        snapshot keeps that snapshot as the base: rates over a sliver of time are noise."""
        snaps = self.fleet.run(self._snapshots(clock), timeout=10.0)
        snaps = {n: s for n, s in snaps.items()
                 if n not in self._last or s.time - self._last[n].time >= min_interval}
        stats = link_stats(self.links, self._last, snaps)
        for name, snap in snaps.items():
            last = self._last.get(name)
            for port, pfc in snap.pfc.items():
                before = last.pfc[port].storms if last and port in last.pfc else 0
                if snap.drops_read and pfc.storms > before:
                    self.storms.append((name, port, pfc.storms - before))
        # Between two drop readings a link shows what the last one found.
        for link, st in list(stats.items()):
            if snaps[self._sender[link]].drops_read:
                self._recent_drops[link] = (st.drops, st.pauses, st.paused_s)
            else:
                drops, pauses, paused_s = self._recent_drops.get(link, (0, 0, 0.0))
                stats[link] = dataclasses.replace(st, drops=drops, pauses=pauses, paused_s=paused_s)
        self._last.update(snaps)
        if stats:
            self.latest = {**self.latest, **stats}
        return stats
