"""GOR's route repair across switches (controller/repair.py), without a fabric: the
order in which it writes the switches when cables fail and come back, so that no
switch sends traffic to one that cannot forward it yet."""

from __future__ import annotations

import threading
from pathlib import Path

from controller.events import EventLog
from controller.repair import TIERS, RouteRepair, repair_steps
from controller.routes import NO_FAILURES, cable, switch_program
from topo.addressing import AddressPlan
from topo.spec import load_spec

FABRICS = Path(__file__).resolve().parent.parent / "topo" / "fabrics"


class RecordingFleet:
    """The writes a repair makes, one list of switch names per `write` (the switches
    of one call are written at once: their order among them is the network's)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, list]] = []

    def write(self, updates: dict[str, list], timeout: float = 10.0) -> None:
        self.calls.append(updates)


def repairer(plan: AddressPlan, tmp_path: Path) -> RouteRepair:
    return RouteRepair(plan, EventLog(None), tmp_path, threading.RLock())


def roles(plan: AddressPlan, fleet: RecordingFleet) -> list[set[str]]:
    role = {sw.name: sw.role for sw in plan.switches}
    return [{role[n] for n in call} for call in fleet.calls]


def test_steps_fail_from_the_hosts_up_and_come_back_from_the_top_down():
    a, b = cable("b0l0", "sp0"), cable("b1l1", "sp1")
    assert repair_steps(NO_FAILURES, frozenset({a})) == [(NO_FAILURES, frozenset({a}), TIERS)]
    assert repair_steps(frozenset({a}), NO_FAILURES) == [(frozenset({a}), NO_FAILURES, TIERS[::-1])]
    # One fails as the other comes back: through the state with both down.
    assert repair_steps(frozenset({a}), frozenset({b})) == [
        (frozenset({a}), frozenset({a, b}), TIERS), (frozenset({a, b}), frozenset({b}), TIERS[::-1])]
    assert repair_steps(frozenset({a}), frozenset({a})) == []


def test_a_cable_back_gives_the_spine_its_route_before_a_leaf_sends_to_it_again(tmp_path):
    plan = AddressPlan(load_spec(FABRICS / "default.yaml"))
    down = frozenset({cable("b0l0", "sp0")})
    repair, fleet = repairer(plan, tmp_path), RecordingFleet()
    repair.repair(down, fleet)
    # Failing: the leaves stop using sp0 for b0l0's subnet first, then sp0 drops the route.
    assert roles(plan, fleet) == [{"leaf"}, {"spine"}]
    assert set(fleet.calls[1]) == {"sp0"}
    fleet.calls.clear()
    repair.repair(NO_FAILURES, fleet)
    assert roles(plan, fleet) == [{"spine"}, {"leaf"}]
    # The spine's write puts its route down the cable back, before any leaf's.
    subnet = plan.rail_block_subnet(0, 0)
    route = next(r for r in switch_program(plan, "sp0").routes if r.prefix == subnet)
    assert route.port is not None and set(fleet.calls[0]) == {"sp0"}
    assert subnet not in {r.prefix for r in switch_program(plan, "sp0", down).routes}   # gone while down
    assert repair.state()[0] == NO_FAILURES


def test_a_super_spine_cable_back_is_written_from_the_super_spines_down(tmp_path):
    plan = AddressPlan(load_spec(FABRICS / "three-tier.yaml"))
    spine = next(sw for sw in plan.switches if sw.role == "spine")
    top = next(sw for sw in plan.switches if sw.role == "superspine" and sw.spine == spine.spine)
    down = frozenset({cable(spine.name, top.name)})
    repair, fleet = repairer(plan, tmp_path), RecordingFleet()
    repair.repair(down, fleet)
    failing = [r.pop() for r in roles(plan, fleet)]          # one tier per write
    assert failing[0] != "superspine" and failing == sorted(failing, key=TIERS.index), failing
    fleet.calls.clear()
    repair.repair(NO_FAILURES, fleet)
    back = [r.pop() for r in roles(plan, fleet)]
    assert back[0] == "superspine" and back == sorted(back, key=TIERS.index, reverse=True), back
    assert sorted(back) == sorted(failing)
