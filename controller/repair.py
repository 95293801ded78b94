"""Routing around failed cables: the set of cables GOR routes around, the switch programs
that follow from it, and the topology published to the agents.

`repair` writes only what changes (`routes.program_updates`) and does the switch I/O
without GOR's lock; the cables down and the published version then change together
under the lock, so a reader (the REPL's ``link``) sees a repair whole: routes written,
then the file. While the writes are under way, a switch that reconnects is already
re-pushed with the new set (`program`), so no switch misses a repair.

Across switches the writes go tier by tier (`repair_steps`), so that no switch sends
traffic to one that cannot forward it yet. All at once, a cable coming back let a leaf
put the spine back in its ECMP groups before the spine had its route down that cable
again: the frames sent meanwhile were dropped at the spine, and the flows stalled for
go-back-N's timeout (~1 s) after the cable was back (a failure-scenario test, 1 run in
17 on 2026-12-07).
"""

from __future__ import annotations

import threading
from pathlib import Path

from controller.events import EventLog
from controller.publish import publish, topology_document
from controller.routes import NO_FAILURES, Down, SwitchProgram, program_updates, switch_program
from controller.switches import SwitchFleet, SwitchFleetError
from topo.addressing import AddressPlan

# The tiers from the hosts up: a leaf sends up to spines, a spine down to leaves and up
# to super-spines, a super-spine down to spines.
TIERS = ("leaf", "spine", "superspine")
# Steps of a repair: (cables down before, after, the tiers in the order they are written).
Step = tuple[Down, Down, tuple[str, ...]]


def repair_steps(old: Down, new: Down) -> list[Step]:
    """How to go from cables ``old`` down to ``new`` down. Cables failing: the tiers
    from the hosts up (a switch stops sending across a cable before the switch above it
    drops the routes down that cable); cables back: from the top down (the switch above
    has its routes back before the one below sends to it again). A change that does
    both fails what fails first, through the state with both sets down."""
    both = old | new
    steps: list[Step] = []
    if both != old:
        steps.append((old, both, TIERS))
    if new != both:
        steps.append((both, new, TIERS[::-1]))
    return steps


class RouteRepair:
    """The failure state of one fabric's routes (see the module docstring)."""

    def __init__(self, plan: AddressPlan, events: EventLog, publish_dir: Path, lock: threading.RLock) -> None:
        self.plan = plan
        self.events = events
        self.publish_dir = publish_dir
        self.lock = lock
        self.down: Down = NO_FAILURES      # as repaired and published
        self.version = 0                   # of the published topology
        self._target: Down = NO_FAILURES   # what the switches are being given

    def program(self, name: str) -> SwitchProgram:
        """What switch ``name`` must hold now (what a (re)connecting switch is given)."""
        return switch_program(self.plan, name, self._target)

    def state(self) -> tuple[Down, int]:
        """The cables down and the published version, read together."""
        with self.lock:
            return self.down, self.version

    def publish(self) -> None:
        """Write the topology document for the current failures (a new version)."""
        with self.lock:
            self.version += 1
            publish(self.publish_dir, topology_document(self.plan, self.down, self.version))

    def repair(self, down: Down, fleet: SwitchFleet, dead: frozenset[str] = frozenset()) -> None:
        """Reprogram the switches whose routes change with cables ``down`` failed, a tier
        at a time (`repair_steps`; the switches of a tier at once), then publish;
        switches in ``dead`` are not written (when one answers again it is re-pushed
        whole, with ``down`` as it is then). Called by one thread (GOR's loop)."""
        old, self._target = self._target, down
        role = {sw.name: sw.role for sw in self.plan.switches}
        changed: set[str] = set()
        try:
            for before, after, tiers in repair_steps(old, down):
                updates = {sw.name: program_updates(switch_program(self.plan, sw.name, before),
                                                    switch_program(self.plan, sw.name, after))
                           for sw in self.plan.switches if sw.name not in dead}
                for tier in tiers:
                    writes = {n: u for n, u in updates.items() if u and role[n] == tier}
                    if writes:
                        fleet.write(writes)
                        changed.update(writes)
        except SwitchFleetError as e:
            # `down` stays the wanted state: a switch that comes back is re-pushed with it.
            self.events.emit("repair_failed", error=str(e))
        else:
            self.events.emit("repaired", down=sorted("-".join(sorted(c)) for c in down), switches=sorted(changed))
        with self.lock:
            self.down = down
            self.publish()
