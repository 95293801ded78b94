"""Which capture file is which observation point of the fabric.

A switch writes ``<interface>_in.pcap`` and ``<interface>_out.pcap`` per port
(p4sim.switch.pcap, BMv2's --pcap) and the fabric's switch interfaces are named
``<switch>-eth<port>`` (Mininet), so a file name gives the switch, its port and the
direction; the addressing plan then says which link that port is on. The CPU port's
capture (``cpu_out.pcap``, or any ``*cpu_out.pcap``) holds the sampled PacketIns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from topo.addressing import AddressPlan

_PORT_FILE = re.compile(r"^(?P<switch>.+)-eth(?P<port>\d+)_(?P<dir>in|out)\.pcap$")
_CPU_FILE = re.compile(r"^(?:.*[-_])?cpu\d*_out\.pcap$")
# PacketOuts from the controller: nothing the inspection uses, nothing to warn about.
_CPU_IN_FILE = re.compile(r"^(?:.*[-_])?cpu\d*_in\.pcap$")
IN, OUT = "in", "out"


@dataclass(frozen=True)
class Point:
    """One observation point: packets ``direction`` (in/out) of ``switch`` port ``port``,
    i.e. the directed link ``src`` -> ``dst``."""

    switch: str
    port: int
    direction: str
    src: str
    dst: str

    @property
    def link(self) -> str:
        """The directed link the point observes, ``a->b`` (the name GOR's log uses)."""
        return f"{self.src}->{self.dst}"


@dataclass
class CaptureSet:
    """A run's capture files sorted into port captures, CPU captures and the rest."""

    directory: Path
    points: dict[Point, Path]
    cpu: list[Path]
    ignored: list[str]


def find_capture_dir(run_dir: Path) -> Path:
    """``RUN_DIR/pcap`` when it exists (where topo.net puts them), else ``RUN_DIR``."""
    sub = run_dir / "pcap"
    return sub if sub.is_dir() else run_dir


def scan(directory: Path, plan: AddressPlan) -> CaptureSet:
    """Sort the ``*.pcap`` files of ``directory`` by what they observe.

    A port file of a switch the plan does not have, or of a port with no cable, is
    listed in ``ignored`` (a capture of another fabric, or a stale file), not guessed at.
    """
    points: dict[Point, Path] = {}
    cpu: list[Path] = []
    ignored: list[str] = []
    switches = {sw.name for sw in plan.switches}
    for path in sorted(directory.glob("*.pcap")):
        m = _PORT_FILE.match(path.name)
        if m and m["switch"] in switches:
            switch, port = m["switch"], int(m["port"])
            try:
                peer, _ = plan.peer(switch, port)
            except KeyError:
                ignored.append(f"{path.name}: {switch} has no cable on port {port}")
                continue
            src, dst = (peer, switch) if m["dir"] == IN else (switch, peer)
            points[Point(switch, port, m["dir"], src, dst)] = path
        elif _CPU_FILE.match(path.name):
            cpu.append(path)
        elif _CPU_IN_FILE.match(path.name):
            continue
        else:
            ignored.append(f"{path.name}: not a port of fabric {plan.spec.name!r}")
    return CaptureSet(directory, points, cpu, ignored)


def link_point(points: dict[Point, Path], src: str, dst: str) -> Point | None:
    """The point that sees every frame put on link ``src -> dst``: the sender's egress
    capture when the sender is a switch, else the receiving switch's ingress capture."""
    best = None
    for p in points:
        if p.src == src and p.dst == dst:
            if p.direction == OUT and p.switch == src:
                return p
            best = p
    return best
