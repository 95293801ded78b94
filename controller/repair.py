"""Routing around failed cables: the set of cables GOR routes around, the switch programs
that follow from it, and the topology published to the agents.

`repair` writes only what changes (`routes.program_updates`) and does the switch I/O
without GOR's lock; the cables down and the published version then change together
under the lock, so a reader (the REPL's ``link``) sees a repair whole: routes written,
then the file. While the writes are under way, a switch that reconnects is already
re-pushed with the new set (`program`), so no switch misses a repair.
"""

from __future__ import annotations

import threading
from pathlib import Path

from controller.events import EventLog
from controller.publish import publish, topology_document
from controller.routes import NO_FAILURES, Down, SwitchProgram, program_updates, switch_program
from controller.switches import SwitchFleet, SwitchFleetError
from topo.addressing import AddressPlan


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
        """Reprogram the switches whose routes change with cables ``down`` failed, then
        publish; switches in ``dead`` are not written (when one answers again it is
        re-pushed whole, with ``down`` as it is then). Called by one thread (GOR's loop)."""
        old, self._target = self._target, down
        updates = {sw.name: program_updates(switch_program(self.plan, sw.name, old),
                                            switch_program(self.plan, sw.name, down))
                   for sw in self.plan.switches if sw.name not in dead}
        changed = sorted(n for n, u in updates.items() if u)
        try:
            fleet.write({n: updates[n] for n in changed})
        except SwitchFleetError as e:
            # `down` stays the wanted state: a switch that comes back is re-pushed with it.
            self.events.emit("repair_failed", error=str(e))
        else:
            self.events.emit("repaired", down=sorted("-".join(sorted(c)) for c in down), switches=changed)
        with self.lock:
            self.down = down
            self.publish()
