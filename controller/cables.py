"""Which cables between switches are down -- leaf-spine and, in a three-tier fabric,
spine-super-spine -- from the oper status the switches at their ends report, and from
whether those switches answer at all: every cable of a switch that stopped answering
(its P4Runtime stream broken) counts as down, so routes go around a dead switch as
around its cables.

Each switch reports its own ports (p4sim's QueueControl ``GetPortStatus``, read by the
switch process in its own namespace), so a cable of a switch on another machine
(Mininet's cluster mode) is watched like any other: the controller never looks at its
own ``/sys``, where that switch's interfaces do not exist. A cable is up when both ends
report up; an end whose switch did not report (a slow answer, a switch restarting)
tells nothing, so one end's "down" is enough to fail the cable.

A switch that serves no QueueControl (BMv2's simple_switch_grpc) answers UNIMPLEMENTED;
for it alone the reader falls back to the interfaces in the controller machine's
``/sys`` (`oper_up`), where a single-machine fabric's switch ports are -- on cluster
mode such a switch's cables on another machine stay unwatched (its death still counts).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import grpc

from controller.routes import Down, cable
from p4sim.runtime.queues import QueueControlClient
from topo.addressing import AddressPlan

# Where the kernel shows an interface's operational state (the BMv2 fallback only).
SYSFS_NET = Path("/sys/class/net")
# One switch's port status may take this long (s): a tick must not wait on a slow one.
STATUS_TIMEOUT_S = 0.5

# (switch, port) -> operationally up, as reported; a port missing tells nothing.
PortState = Mapping[tuple[str, int], bool]


def oper_up(intf: str) -> bool | None:
    """An interface's operational state in this machine's root namespace (None: no
    such interface here)."""
    try:
        state = (SYSFS_NET / intf / "operstate").read_text().strip()
    except OSError:
        return None
    return state in ("up", "unknown")


class PortReader:
    """Reads every switch's port status over its QueueControl service, all switches
    at once (see the module docstring for the BMv2 fallback)."""

    def __init__(self, plan: AddressPlan, clients: Mapping[str, QueueControlClient]) -> None:
        self.plan = plan
        self.clients = dict(clients)
        self._ports = {sw.name: sorted({p for (s, p) in cable_ends(plan) if s == sw.name}) for sw in plan.switches}
        self._no_service: set[str] = set()   # answered UNIMPLEMENTED: read from /sys
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.clients)), thread_name_prefix="port-status")

    def read(self) -> dict[tuple[str, int], bool]:
        """Every reported port's state now."""
        futures = {name: self._pool.submit(self._one, name) for name in self.clients}
        out: dict[tuple[str, int], bool] = {}
        for name, future in futures.items():
            out.update({(name, port): up for port, up in future.result().items()})
        return out

    def _one(self, name: str) -> dict[int, bool]:
        if name in self._no_service:
            return self._local(name)
        try:
            return self.clients[name].port_status()
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._no_service.add(name)
                return self._local(name)
            return {}   # no answer now: nothing known about its ports

    def _local(self, name: str) -> dict[int, bool]:
        states = {port: oper_up(self.plan.intf(name, port)) for port in self._ports[name]}
        return {port: up for port, up in states.items() if up is not None}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def cable_ends(plan: AddressPlan) -> list[tuple[str, int]]:
    """(switch, port) of both ends of every switch-switch cable."""
    return [end for link in plan.switch_links for end in ((link.a, link.a_port), (link.b, link.b_port))]


@dataclass(frozen=True)
class CableChange:
    """One cable whose state differs from the failure set it was compared with."""

    a: str
    b: str
    up: bool

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"


class CableWatch:
    """The switch-switch cables of one plan (leaf-spine, spine-super-spine), with the
    switch port at each end."""

    def __init__(self, plan: AddressPlan) -> None:
        self.cables = [(link.a, link.b, (link.a, link.a_port), (link.b, link.b_port))
                       for link in plan.switch_links]

    def changes(self, down: Down, ports: PortState, dead: frozenset[str] = frozenset()) -> list[CableChange]:
        """The cables that went down or came back, compared with ``down``, by the
        switches' reported ``ports``; a cable of a switch in ``dead`` is down whatever
        its ends said."""
        out = []
        for a, b, end_a, end_b in self.cables:
            states = (ports.get(end_a), ports.get(end_b))
            if a in dead or b in dead or False in states:
                up = False
            elif None in states:
                continue
            else:
                up = True
            key = cable(a, b)
            if not up and key not in down:
                out.append(CableChange(a, b, False))
            elif up and key in down:
                out.append(CableChange(a, b, True))
        return out


def after(down: Down, changes: list[CableChange]) -> Down:
    """The failure set ``down`` with ``changes`` applied."""
    out = set(down)
    for c in changes:
        if c.up:
            out.discard(cable(c.a, c.b))
        else:
            out.add(cable(c.a, c.b))
    return frozenset(out)
