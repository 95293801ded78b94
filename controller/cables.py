"""Which leaf-spine cables are down, from the operational state of their two interfaces
and from the switches at their ends: every cable of a switch that stopped answering
(its P4Runtime stream broken) counts as down, so routes go around a dead switch as
around its cables (spine-super-spine cables are not watched: routes do not yet go
around them).

The switches run in the root namespace, so each of their ports is an interface there,
named by the addressing plan (`AddressPlan.intf`); a cable is up when both ends are.
An interface that does not exist (a fabric being torn down) tells nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from controller.routes import Down, cable
from topo.addressing import AddressPlan

# Where the kernel shows an interface's operational state.
SYSFS_NET = Path("/sys/class/net")


def oper_up(intf: str) -> bool | None:
    """An interface's operational state in the root namespace (None: no interface)."""
    try:
        state = (SYSFS_NET / intf / "operstate").read_text().strip()
    except OSError:
        return None
    return state in ("up", "unknown")


@dataclass(frozen=True)
class CableChange:
    """One cable whose state differs from the failure set it was compared with."""

    leaf: str
    spine: str
    up: bool

    @property
    def name(self) -> str:
        return f"{self.leaf}-{self.spine}"


class CableWatch:
    """The leaf-spine cables of one plan, with the interface at each end."""

    def __init__(self, plan: AddressPlan, state: Callable[[str], bool | None] = oper_up) -> None:
        self.state = state
        self.cables = [(leaf.name, plan.spine(leaf.pod, k).name, plan.intf(leaf.name, plan.uplink_port(k)),
                        plan.intf(plan.spine(leaf.pod, k).name, plan.spine_port(leaf.block, leaf.rail)))
                       for leaf in plan.leaves for k in range(plan.spec.spines)]

    def changes(self, down: Down, dead: frozenset[str] = frozenset()) -> list[CableChange]:
        """The cables that went down or came back, compared with ``down``; a cable of
        a switch in ``dead`` is down whatever its interfaces say."""
        out = []
        for leaf, spine, leaf_intf, spine_intf in self.cables:
            up = False if leaf in dead or spine in dead else self.state(leaf_intf) and self.state(spine_intf)
            if up is None:
                continue
            key = cable(leaf, spine)
            if not up and key not in down:
                out.append(CableChange(leaf, spine, False))
            elif up and key in down:
                out.append(CableChange(leaf, spine, True))
        return out


def after(down: Down, changes: list[CableChange]) -> Down:
    """The failure set ``down`` with ``changes`` applied."""
    out = set(down)
    for c in changes:
        if c.up:
            out.discard(cable(c.leaf, c.spine))
        else:
            out.add(cable(c.leaf, c.spine))
    return frozenset(out)
