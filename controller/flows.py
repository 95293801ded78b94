"""The flows GOR knows: listed by their TCCL agent (movable: GOR can tell the agent to
change the source port) or only seen in sampled packets.

A flow is keyed by who knows it: ``("agent", server, qpn)`` or ``("sampled", src, dst,
sport, dport)``. When an agent lists a flow that was known from samples, the agent's
flow takes over the sampled one's id, so the number a person saw in `flows` stays.
The table holds no lock: GOR's lock guards it with the rest of the loop's state.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterator

from controller.agents import AgentFlow
from controller.elephants import Sample
from topo.hashmodel import FiveTuple
from topo.headers import PROTO_UDP

# A flow neither listed by an agent nor sampled for this long is forgotten (s).
FORGET_S = 10.0


@dataclass
class Flow:
    """A flow GOR knows: from an agent (movable) or only from samples."""

    id: int
    src: str
    dst: str
    sport: int
    dport: int
    server: str | None = None
    qpn: int = 0
    created_ns: int = 0       # the agent's QP creation time (0: a sampled flow)
    rate_bps: float = 0.0
    bytes: int = 0
    state: str = ""
    pinned: bool = False
    moved_at: float = float("-inf")
    last_seen: float = 0.0
    first_data: float = float("inf")    # first sample of a data frame (not an ACK/CNP): see `sampled`
    active_at: float = float("-inf")    # last listing that showed it sending (more bytes)

    @property
    def five_tuple(self) -> FiveTuple:
        return FiveTuple(self.src, self.dst, PROTO_UDP, self.sport, self.dport)

    @property
    def label(self) -> str:
        return f"{self.src}:{self.sport}->{self.dst}"


class FlowTable:
    """Every flow GOR knows, from samples and from the agents' listings."""

    def __init__(self) -> None:
        self._flows: dict[tuple, Flow] = {}
        self._ids = itertools.count(1)

    def __iter__(self) -> Iterator[Flow]:
        return iter(self._flows.values())

    def __len__(self) -> int:
        return len(self._flows)

    def sampled(self, s: Sample, control_max: int = 0) -> None:
        """A sampled packet: the flow with its 5-tuple was seen now (a new flow if
        none has it). Frames of at most ``control_max`` bytes are RoCE control frames
        (ACK, CNP): they do not date the flow's first data (`first_data`), which tells
        GOR that a sender started that its agents' listing may not name yet."""
        f = s.flow
        data = s.length > control_max
        for flow in self._flows.values():
            if (flow.src, flow.dst, flow.sport, flow.dport) == (f.src, f.dst, f.sport, f.dport):
                flow.last_seen = s.time
                if data:
                    flow.first_data = min(flow.first_data, s.time)
                return
        key = ("sampled", f.src, f.dst, f.sport, f.dport)
        self._flows[key] = Flow(next(self._ids), f.src, f.dst, f.sport, f.dport, last_seen=s.time,
                                first_data=s.time if data else float("inf"))

    def unlisted_since(self, t: float) -> bool:
        """Whether a flow no agent lists sent its first sampled data frame after ``t``
        (the last listing's request): a new sender the agents can name now."""
        return any(flow.server is None and t < flow.first_data < float("inf") for flow in self._flows.values())

    def merge(self, answered: set[str], listed: list[AgentFlow], now: float,
              port_in_flight: Callable[[Flow], bool]) -> None:
        """Merge the agents' flow lists: an agent flow takes over the id of the sampled
        flow with its 5-tuple; a QP created anew is a new flow (a new job reusing the QP
        number: no cooldown, no pin); flows of agents that are gone, and sampled flows
        not seen for `FORGET_S`, are forgotten. A flow whose new port is being
        commanded (``port_in_flight``) keeps the port GOR gave it, not the listed one."""
        live = set()
        for af in listed:
            key = ("agent", af.server, af.qpn)
            live.add(key)
            sampled = self._flows.pop(("sampled", af.src, af.dst, af.sport, af.dport), None)
            flow = self._flows.get(key)
            if flow is None or af.created_ns != flow.created_ns:
                flow = Flow(flow.id if flow else sampled.id if sampled else next(self._ids),
                            af.src, af.dst, af.sport, af.dport, server=af.server, qpn=af.qpn,
                            created_ns=af.created_ns)
                self._flows[key] = flow
            if not port_in_flight(flow):
                flow.sport = af.sport
            if af.bytes > flow.bytes:
                flow.active_at = now
            flow.rate_bps, flow.state, flow.bytes, flow.last_seen = af.rate_bps, af.state, af.bytes, now
        for key, flow in list(self._flows.items()):
            gone = key[0] == "agent" and key not in live and \
                (flow.server not in answered or now - flow.last_seen > FORGET_S)
            stale = key[0] == "sampled" and now - flow.last_seen > FORGET_S
            if (gone or stale) and not flow.pinned:
                del self._flows[key]

    def find(self, ref: str) -> Flow:
        """A flow by its id number or its label (``src:sport->dst``)."""
        for flow in self._flows.values():
            if ref == str(flow.id) or ref == flow.label:
                return flow
        raise KeyError(f"no flow {ref!r} (see `flows` for ids)")

    def first(self, f: FiveTuple) -> Flow | None:
        """The flow with ``f``'s addresses and source port (what a sample tells)."""
        return next((flow for flow in self._flows.values()
                     if (flow.src, flow.dst, flow.sport) == (f.src, f.dst, f.sport)), None)

    def listed(self, f: FiveTuple) -> bool:
        """Whether an agent lists a flow with ``f``'s addresses and source port."""
        return any(flow.server is not None and (flow.src, flow.dst, flow.sport) == (f.src, f.dst, f.sport)
                   for flow in self._flows.values())

    def ports(self, src: str, dst: str) -> set[int]:
        """The source ports of the flows from ``src`` to ``dst``."""
        return {flow.sport for flow in self._flows.values() if (flow.src, flow.dst) == (src, dst)}
