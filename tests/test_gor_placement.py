"""GOR's demand estimator (Hedera's worked examples), its global placement and the
simulation of candidate placements: pure functions on small inputs, no root."""

from __future__ import annotations

import random

import pytest

from controller.demand import FlowEnds, estimate_demands
from controller.paths import links_of
from controller.placement import FlowToPlace, place
from controller.simulate import rank, ranked_paths, simulate

# --- demand estimation ---------------------------------------------------------------


def hedera_loop(flows: list[FlowEnds], cap: dict[str, float]) -> dict:
    """Hedera's estimator as the paper writes it (Al-Fares et al., fig. 7), flow by
    flow: the reference the vectorised `estimate_demands` is held to."""
    demand = {f.key: 0.0 for f in flows}
    converged = {f.key: False for f in flows}
    while True:
        before = dict(demand)
        for host in cap:
            out = [f for f in flows if f.src == host]
            free = [f for f in out if not converged[f.key]]
            fixed = sum(demand[f.key] for f in out if converged[f.key])
            for f in free:
                demand[f.key] = max(0.0, cap[host] - fixed) / len(free)
        for host in cap:
            into = [f for f in flows if f.dst == host]
            if sum(demand[f.key] for f in into) <= cap[host]:
                continue
            limited, kept = {f.key for f in into}, 0.0
            share = cap[host] / len(into)
            while True:
                below = [f for f in into if f.key in limited and demand[f.key] < share]
                for f in below:
                    kept += demand[f.key]
                    limited.discard(f.key)
                if not below or not limited:
                    break
                share = (cap[host] - kept) / len(limited)
            for f in into:
                if f.key in limited:
                    demand[f.key], converged[f.key] = share, True
        if all(abs(demand[k] - before[k]) <= 1e-9 * max(cap.values()) for k in demand):
            return demand


def test_estimate_equals_hederas_loop_on_random_traffic():
    """The water level per receiver (sorted prefix sums over numpy columns) is what
    Hedera's loop of equal shares converges to, on 300 random matrices of hosts with
    different NIC rates."""
    rng = random.Random(5)
    for _ in range(300):
        hosts = [f"h{i}" for i in range(rng.randint(2, 9))]
        cap = {h: rng.choice([1.0, 2.0, 0.5, 0.1 + rng.random()]) for h in hosts}
        flows = [FlowEnds(k, *rng.sample(hosts, 2)) for k in range(rng.randint(1, 30))]
        assert estimate_demands(flows, cap) == pytest.approx(hedera_loop(flows, cap), abs=1e-12)


def test_a_host_sending_to_several_receivers_shares_its_nic_equally():
    flows = [FlowEnds(k, "A", dst) for k, dst in enumerate("BCD")]
    assert estimate_demands(flows, 1.0) == pytest.approx({0: 1 / 3, 1: 1 / 3, 2: 1 / 3})


def test_several_senders_to_one_host_share_the_receivers_nic():
    flows = [FlowEnds(src, src, "D") for src in "ABC"]
    assert estimate_demands(flows, 9e6) == pytest.approx({"A": 3e6, "B": 3e6, "C": 3e6})


def test_a_flow_limited_at_its_receiver_leaves_the_rest_to_its_senders_other_flows():
    # Hedera's estimator on a mixed matrix: A sends to X and Y; B and C send to Y too.
    # Y is shared three ways (1/3 each); A's flow to X gets what A's NIC has left (2/3).
    flows = [FlowEnds("AX", "A", "X"), FlowEnds("AY", "A", "Y"), FlowEnds("BY", "B", "Y"),
             FlowEnds("CY", "C", "Y")]
    assert estimate_demands(flows, 1.0) == pytest.approx({"AX": 2 / 3, "AY": 1 / 3, "BY": 1 / 3, "CY": 1 / 3})


def test_a_receiver_below_its_capacity_leaves_small_flows_alone():
    # D receives a flow of 1/4 (its sender sends four) and two of line rate: max-min
    # fair at D gives the small one its 1/4 and the others (1 - 1/4) / 2 each.
    flows = [FlowEnds(("A", d), "A", d) for d in "DEFG"] + [FlowEnds("B", "B", "D"), FlowEnds("C", "C", "D")]
    d = estimate_demands(flows, 1.0)
    assert d[("A", "D")] == pytest.approx(0.25)
    assert d["B"] == d["C"] == pytest.approx(0.375)
    assert d[("A", "E")] == pytest.approx(0.25)


def test_a_ring_with_two_qps_per_connection_wants_half_the_nic_per_qp():
    ring = ["h0", "h1", "h2", "h3"]
    flows = [FlowEnds((a, q), a, b) for a, b in zip(ring, ring[1:] + ring[:1]) for q in range(2)]
    assert estimate_demands(flows, 10e6) == pytest.approx({f.key: 5e6 for f in flows})


def test_demand_estimation_rejects_bad_input_by_name():
    with pytest.raises(ValueError, match="to itself"):
        estimate_demands([FlowEnds(1, "A", "A")], 1.0)
    with pytest.raises(ValueError, match="no capacity for host.*B"):
        estimate_demands([FlowEnds(1, "A", "B")], {"A": 1.0})
    with pytest.raises(ValueError, match="capacity must be > 0"):
        estimate_demands([FlowEnds(1, "A", "B")], 0.0)
    with pytest.raises(ValueError, match="unique"):
        estimate_demands([FlowEnds(1, "A", "B"), FlowEnds(1, "A", "C")], 1.0)


# --- placement -------------------------------------------------------------------------

CAP = 10e6


def via(src: str, leaf: str, spine: str, dleaf: str, dst: str) -> tuple[str, ...]:
    return (src, leaf, spine, dleaf, dst)


def two_spine_flow(key, src, leaf, dleaf, dst, spine, demand, movable=True) -> FlowToPlace:
    paths = tuple(via(src, leaf, s, dleaf, dst) for s in ("S0", "S1"))
    return FlowToPlace(key, demand, via(src, leaf, spine, dleaf, dst), paths, movable)


def fabric_caps(leaves=("L0", "L1", "L2"), spines=("S0", "S1")) -> dict:
    return {link: CAP for l in leaves for s in spines for link in ((l, s), (s, l))}


def check_under(result, caps, bar):
    for link, util in result.projected.items():
        assert util <= bar + 1e-9, (link, util)


def test_first_fit_spreads_flows_under_the_threshold_and_moves_only_what_must():
    # Three 3 Mbit/s flows from L0 on S0 (90 %): one of them must go, the rest stay.
    flows = [two_spine_flow(k, f"h{k}", "L0", "L1", f"r{k}", "S0", 3e6) for k in range(3)]
    caps = fabric_caps()
    r = place(flows, caps, alarmed={("L0", "S0")}, safety=0.75)
    assert r.method == "first-fit" and len(r.moves) == 1
    assert all(p[2] == "S1" for p in r.moves.values())
    check_under(r, caps, 0.75)
    assert r.worst_before == pytest.approx(0.9) and r.worst_after == pytest.approx(0.6)


def test_no_flow_is_moved_onto_an_alarmed_link():
    # S1's downlink to L1 is alarmed (another leaf's traffic): the flow that would fit
    # there stays, although its own uplink is over the threshold.
    flows = [two_spine_flow(k, f"h{k}", "L0", "L1", f"r{k}", "S0", 4e6) for k in range(2)]
    r = place(flows, fabric_caps(), alarmed={("L0", "S0"), ("S1", "L1")}, safety=0.75)
    assert r.moves == {}
    # With S1 clear, one of them goes there.
    r = place(flows, fabric_caps(), alarmed={("L0", "S0")}, safety=0.75)
    assert [p[2] for p in r.moves.values()] == ["S1"]
    assert not any(l in {("L0", "S0")} for p in r.moves.values() for l in links_of(list(p)))


def test_fixed_flows_load_the_links_but_never_move():
    fixed = two_spine_flow("fixed", "x", "L2", "L1", "y", "S1", 6e6, movable=False)
    flows = [fixed] + [two_spine_flow(k, f"h{k}", "L0", "L1", f"r{k}", "S0", 4e6) for k in range(2)]
    r = place(flows, fabric_caps(), alarmed={("L0", "S0")}, safety=0.75)
    # Moving one 4 Mbit/s flow to S1 would put S1->L1 at 100 %: the threshold forbids
    # it, and the even placement is no better than staying (80 % on S0->L1 either way).
    assert "fixed" not in r.moves
    assert r.paths["fixed"][2] == "S1"


def test_line_rate_flows_get_an_even_placement_when_the_threshold_cannot_be_met():
    # A ring's hop pattern with input order: every leaf sends two connections (four QP
    # flows of half a NIC each) across the spines, so every uplink is at 100 % at best.
    # Random ports put three of L0's on S0 and three of L1's on S1: the even placement
    # (a bipartite colouring) fixes both.
    spines = {0: "S0", 1: "S0", 2: "S0", 3: "S1"}
    flows = [two_spine_flow(k, f"h{k // 2}", "L0", "L1", f"r{k // 2}", spines[k], 5e6) for k in range(4)]
    flows += [two_spine_flow(10 + k, f"g{k // 2}", "L1", "L0", f"s{k // 2}", "S0" if k == 0 else "S1", 5e6)
              for k in range(4)]
    caps = fabric_caps()
    collided = {("L0", "S0"), ("S0", "L1"), ("L1", "S1"), ("S1", "L0")}
    r = place(flows, caps, alarmed=collided, safety=0.75)
    assert r.worst_before == pytest.approx(1.5)
    assert r.worst_after == pytest.approx(1.0)
    check_under(r, caps, 1.0)
    # Every link within its bar: the threshold, or the even placement's level.
    assert all(r.projected[l] <= r.bars[l] + 1e-9 for l in caps)
    # Fewest moves: one flow of each leaf, and none onto a collided link it did not use.
    assert sorted(p[2] for p in r.moves.values()) == ["S0", "S1"]


def test_a_placement_no_better_than_the_current_one_moves_nothing():
    flows = [two_spine_flow(k, f"h{k}", "L0", "L1", f"r{k}", "S0" if k < 2 else "S1", 5e6) for k in range(4)]
    r = place(flows, fabric_caps(), alarmed={("L0", "S0")}, safety=0.75)
    assert r.moves == {} and r.worst_after == pytest.approx(1.0)


def test_placement_rejects_bad_input_by_name():
    f = two_spine_flow(1, "h", "L0", "L1", "r", "S0", 1e6)
    with pytest.raises(ValueError, match="safety threshold"):
        place([f], fabric_caps(), set(), 1.5)
    with pytest.raises(ValueError, match="negative demand"):
        place([two_spine_flow(1, "h", "L0", "L1", "r", "S0", -1.0)], fabric_caps(), set(), 0.75)
    with pytest.raises(ValueError, match="unique"):
        place([f, f], fabric_caps(), set(), 0.75)
    with pytest.raises(ValueError, match="capacity must be > 0"):
        place([f], {("L0", "S0"): 0.0}, set(), 0.75)
    with pytest.raises(ValueError, match="no candidate path"):
        place([FlowToPlace(2, 1e6, (), ())], fabric_caps(), set(), 0.75)


def test_a_peak_the_movers_can_lower_is_lowered_although_a_higher_one_stays():
    # L2's four flows on S0 (200 %) may not move (cooling down); L0's three on S0
    # (150 %) can: one goes to S1 although the fabric's worst link stays at 200 %.
    stuck = [two_spine_flow(f"x{k}", f"g{k}", "L2", "L3", f"s{k}", "S0", 5e6, movable=False) for k in range(4)]
    flows = stuck + [two_spine_flow(k, f"h{k}", "L0", "L1", f"r{k}", "S0" if k < 3 else "S1", 5e6)
                     for k in range(4)]
    caps = fabric_caps(leaves=("L0", "L1", "L2", "L3"))
    r = place(flows, caps, alarmed={("L0", "S0"), ("L2", "S0")}, safety=0.75)
    assert [p[2] for p in r.moves.values()] == ["S1"] and r.worst_after == pytest.approx(2.0)


# --- simulating candidate placements (controller.simulate) -----------------------------

# Two leaves, two spines, 10 Mbit/s uplinks (judged links only: NIC links are in the demands).
UP = {(a, b): 10e6 for a, b in [("l0", "s0"), ("l0", "s1"), ("s0", "l1"), ("s1", "l1")]}
VIA = {s: ("h0", "l0", s, "l1", "h1") for s in ("s0", "s1")}


def test_simulated_rates_are_max_min_fair_capped_at_the_demands():
    # Two flows wanting 10 on one uplink: 5 each, the step twice as long, the link full.
    p = simulate({1: VIA["s0"], 2: VIA["s0"]}, {1: 10e6, 2: 10e6}, UP)
    assert p.rates == pytest.approx({1: 5e6, 2: 5e6}) and p.step_factor == pytest.approx(2.0)
    assert p.worst_util == pytest.approx(1.0) and p.worst_link in {("l0", "s0"), ("s0", "l1")}
    # A flow wanting 3 keeps its 3; the other gets the rest: 7 of its 10.
    p = simulate({1: VIA["s0"], 2: VIA["s0"]}, {1: 3e6, 2: 10e6}, UP)
    assert p.rates == pytest.approx({1: 3e6, 2: 7e6}) and p.step_factor == pytest.approx(10 / 7)
    # Apart: each at its demand; the worst link half full. No demand: no rate.
    p = simulate({1: VIA["s0"], 2: VIA["s1"], 3: VIA["s1"]}, {1: 5e6, 2: 5e6, 3: 0.0}, UP)
    assert p.rates == pytest.approx({1: 5e6, 2: 5e6}) and p.step_factor == pytest.approx(1.0)
    assert p.worst_util == pytest.approx(0.5)


def test_candidates_rank_by_step_then_worst_link_then_fewer_moves():
    current = {1: VIA["s0"], 2: VIA["s0"], 3: VIA["s1"]}
    demands = {1: 6e6, 2: 6e6, 3: 2e6}
    options = {k: (VIA["s0"], VIA["s1"]) for k in current}
    # The placement moves flow 2 to s1 (8 there, 6 on s0): better than staying (12 on s0).
    ranked = rank(current, {**current, 2: VIA["s1"]}, options, demands, UP)
    assert [c.moved for c in ranked] == [(2,), ()]
    assert ranked[0].prediction.step_factor == pytest.approx(1.0)
    assert ranked[1].prediction.step_factor == pytest.approx(6 / 5)
    assert ranked[0].summary() == {"moves": 1, "step_factor": 1.0, "worst_util": 0.8,
                                   "worst_link": ranked[0].summary()["worst_link"]}
    assert ranked_paths(2, VIA["s0"], ranked) == {VIA["s1"]: pytest.approx(6e6)}
    # A placement that moves two flows where one would do better: a one-move variant
    # (the other flow left where it is) ranks first.
    two = rank(current, {**current, 1: VIA["s1"], 2: VIA["s1"]},
               {1: (VIA["s0"], VIA["s1"]), 2: (VIA["s0"], VIA["s1"])}, {1: 4e6, 2: 4e6, 3: 2e6}, UP)
    # Every candidate steps at 1.0 (10 Mbit/s carries 4 + 4 + 2); worst links 0.6 for
    # either single move, 0.8 in force, 1.0 for both moved.
    assert [(c.moved, round(c.prediction.worst_util, 3)) for c in two] == [((2,), 0.6), ((1,), 0.6), ((), 0.8),
                                                                          ((1, 2), 1.0)]
