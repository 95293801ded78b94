"""Elephant detection from sampled packets (the sFlow stand-in).

Every switch clones 1 in ``sample_rate`` RoCE data packets to the controller with a
``packet_in`` header: ingress and egress port, the queue depth the packet saw, the
switch id; the payload is the packet's first 128 bytes. A `Sample` is one of those,
decoded; `SampleWindow` keeps the last ``window_s`` seconds of them and ranks the flows
that left a given switch port by estimated bytes: samples x sample_rate x packet size,
which is what sFlow does (each sample stands for N packets). The frame is read by the
fabric's one decoder (`topo.frames`); the PacketIn metadata carries the ``packet_in``
header's fields by their names in the frame layout (`topo.headers`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Iterable

from topo.frames import decode
from topo.hashmodel import FiveTuple
from topo.headers import ETHERNET, PROTO_UDP


@dataclass(frozen=True)
class Sample:
    """One sampled packet: where it was seen, and its flow and size."""

    time: float
    switch: str
    ingress_port: int
    egress_port: int
    queue_depth: int
    flow: FiveTuple
    length: int          # bytes on the wire (Ethernet header + IP total length)


def parse_sample(time: float, switch: str, metadata: dict, payload: bytes) -> Sample | None:
    """Decode a PacketIn of the sampling clone (`topo.frames.decode`); None if it is not
    a well-formed IPv4/UDP packet (whatever a switch sends, GOR's input)."""
    packet = decode(payload)
    if packet is None or packet.proto != PROTO_UDP:
        return None
    return Sample(time, switch, int(metadata.get("ingress_port", 0)), int(metadata.get("egress_port", 0)),
                  int(metadata.get("qdepth", 0)),
                  FiveTuple(packet.src, packet.dst, packet.proto, packet.sport, packet.dport),
                  ETHERNET.length + packet.ip_length)


@dataclass(frozen=True)
class Elephant:
    """A flow's estimate over the window on one switch port."""

    flow: FiveTuple
    bytes: float
    rate_bps: float
    samples: int


class SampleWindow:
    """The samples of the last ``window_s`` seconds."""

    def __init__(self, window_s: float, sample_rate: int) -> None:
        if window_s <= 0 or sample_rate < 1:
            raise ValueError(f"sample window: window_s > 0 and sample_rate >= 1 needed, "
                             f"got {window_s}, {sample_rate}")
        self.window_s = window_s
        self.sample_rate = sample_rate
        self._samples: deque[Sample] = deque()
        # The same samples by the port they left by: a port's elephants and a move's
        # evidence read only that port's (a window holds thousands of samples, and a
        # move in flight is looked for every 20 ms).
        self._by_port: dict[tuple[str, int], deque[Sample]] = defaultdict(deque)

    def add(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            self._samples.append(s)
            self._by_port[(s.switch, s.egress_port)].append(s)

    def prune(self, now: float) -> None:
        old = now - self.window_s
        while self._samples and self._samples[0].time < old:
            s = self._samples.popleft()
            kept = self._by_port[(s.switch, s.egress_port)]
            if kept and kept[0] is s:
                kept.popleft()

    def __len__(self) -> int:
        return len(self._samples)

    def flows(self, now: float, switch: str | None = None, egress_port: int | None = None
              ) -> list[Elephant]:
        """Flows seen (at ``switch`` leaving by ``egress_port``, if given) in the window,
        largest first (ties: by 5-tuple, so the order is reproducible)."""
        self.prune(now)
        count: dict[FiveTuple, int] = defaultdict(int)
        size: dict[FiveTuple, int] = defaultdict(int)
        first: dict[FiveTuple, float] = {}
        if switch is not None and egress_port is not None:
            samples: Iterable[Sample] = self._by_port.get((switch, egress_port), ())
        else:
            samples = self._samples
        for s in samples:
            if (switch is None or s.switch == switch) and (egress_port is None or s.egress_port == egress_port):
                count[s.flow] += 1
                size[s.flow] += s.length
                first.setdefault(s.flow, s.time)
        # A flow that started inside the window is measured over its own lifetime (but
        # not less than a tenth of the window, where one sample would be a spike).
        span = {f: min(self.window_s, max(self.window_s / 10, now - first[f])) for f in count}
        out = [Elephant(f, size[f] * self.sample_rate, size[f] * self.sample_rate * 8 / span[f],
                        count[f]) for f in count]
        out.sort(key=lambda e: (-e.bytes, e.flow.src, e.flow.dst, e.flow.sport))
        return out

    def seen(self, flow: FiveTuple, switch: str, egress_port: int, since: float) -> bool:
        """Whether ``flow`` was sampled leaving ``switch`` by ``egress_port`` at or
        after ``since`` (the data plane's evidence that a flow took a path)."""
        for s in reversed(self._by_port.get((switch, egress_port), ())):
            if s.time < since:
                return False
            if s.flow == flow:
                return True
        return False

    def top(self, now: float, switch: str, egress_port: int, n: int, min_samples: int = 2) -> list[Elephant]:
        """The ``n`` largest flows leaving ``switch`` by ``egress_port`` with at least
        ``min_samples`` samples (one sample is too little to call a flow big)."""
        return [e for e in self.flows(now, switch, egress_port) if e.samples >= min_samples][:n]
