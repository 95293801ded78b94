"""Source-port planning: edge colouring, orthogonal ports on real fabric specs, random odds."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from tccl import ports
from topo.addressing import AddressPlan
from topo.spec import FabricSpec, load_spec

FABRICS = Path(__file__).resolve().parent.parent / "topo" / "fabrics"


def plan(name: str) -> AddressPlan:
    return AddressPlan(load_spec(FABRICS / f"{name}.yaml"))


def conflicts(edges, colors) -> int:
    seen = Counter()
    for (u, v), c in zip(edges, colors):
        seen[(u, c)] += 1
        seen[(v, c)] += 1
    return sum(n - 1 for n in seen.values() if n > 1)


@pytest.mark.parametrize("seed", range(30))
def test_bipartite_colouring_is_proper_when_degrees_allow(seed):
    rng = random.Random(seed)
    k = rng.randint(1, 5)
    left, right = rng.randint(1, 6), rng.randint(1, 6)
    deg_l, deg_r = Counter(), Counter()
    edges = []
    for _ in range(rng.randint(0, 40)):
        u, v = rng.randrange(left), rng.randrange(right)
        if deg_l[u] < k and deg_r[v] < k:
            deg_l[u] += 1
            deg_r[v] += 1
            edges.append((("L", u), ("R", v)))
    colors = ports.color_bipartite(edges, k)
    assert all(0 <= c < k for c in colors)
    assert conflicts(edges, colors) == 0


def test_colouring_overload_spreads_least_loaded():
    edges = [(("L", 0), ("R", i)) for i in range(5)]
    colors = ports.color_bipartite(edges, 2)
    assert sorted(Counter(colors).values()) == [2, 3]
    with pytest.raises(ValueError, match="at least one colour"):
        ports.color_bipartite(edges, 0)


@pytest.mark.parametrize("fabric", ["default", "large"])
@pytest.mark.parametrize("trial", range(5))
def test_orthogonal_flows_take_distinct_uplinks_and_downlinks(fabric, trial):
    p = plan(fabric)
    k = p.spec.spines
    rng = random.Random(trial)
    # From every leaf of block 0, k flows to random NICs of other blocks (same rail:
    # a ring's inter-block hops), as many flows per leaf as spines.
    flows = []
    dst_count = Counter()
    for leaf in [lf for lf in p.leaves if lf.block == 0]:
        srcs = [n for n in p.nics() if n.leaf == leaf.name]
        for i in range(k):
            src = srcs[i % len(srcs)]
            candidates = [n for n in p.nics() if n.block != 0 and n.rail == leaf.rail
                          and dst_count[n.leaf] < k]
            dst = rng.choice(candidates)
            dst_count[dst.leaf] += 1
            flows.append((src.ip, dst.ip))
    assigned = ports.orthogonal_ports(p, flows, seed=trial)
    up = Counter()
    down = Counter()
    for (src, dst) in flows:
        spine = ports.uplink_of(p, src, dst, assigned[(src, dst)])
        up[(p.nic(src).leaf, spine)] += 1
        down[(spine, p.nic(dst).leaf)] += 1
    assert set(up.values()) == {1}          # every uplink of every leaf: exactly one flow
    assert set(down.values()) == {1}        # and every spine->leaf downlink too
    assert all(49152 <= port <= 65535 for port in assigned.values())


def test_same_leaf_flow_gets_a_port_and_no_uplink():
    p = plan("default")
    a, b = p.servers[0].nics[0], p.servers[1].nics[0]
    assert a.leaf == b.leaf
    out = ports.orthogonal_ports(p, [(a.ip, b.ip)], seed=1)
    assert ports.uplink_of(p, a.ip, b.ip, out[(a.ip, b.ip)]) is None


def test_port_for_spine_matches_hash_model_and_rejects_bad_spine():
    p = plan("default")
    src, dst = p.servers[0].nics[1].ip, p.servers[3].nics[1].ip
    for spine in range(p.spec.spines):
        port = ports.port_for_spine(p, src, dst, spine, start=65535)
        assert ports.uplink_of(p, src, dst, port) == spine
    with pytest.raises(ValueError, match="not in the ECMP group"):
        ports.port_for_spine(p, src, dst, 7, start=50000)


def test_random_ports_collide_like_k_factorial_over_k_to_the_k():
    p = plan("large")
    k = p.spec.spines
    leaf_nics = [n for n in p.nics() if n.leaf == p.leaves[0].name]
    remote = [n for n in p.nics() if n.block == 1 and n.rail == 0]
    flows = [(leaf_nics[i % len(leaf_nics)].ip, remote[i].ip) for i in range(k)]
    trials = 400
    perfect = 0
    for t in range(trials):
        assigned = ports.random_ports(flows, seed=t)
        spines = {ports.uplink_of(p, s, d, assigned[(s, d)]) for s, d in flows}
        perfect += len(spines) == k
    expect = math.factorial(k) / k ** k
    sigma = math.sqrt(expect * (1 - expect) / trials)
    assert abs(perfect / trials - expect) < 4 * sigma


def test_perfect_spread_of_the_default_fabric():
    """`make bench`'s port figures: on two spines, orthogonal ports always spread a
    leaf's two flows, random ones half the time (2!/2^2), within 4 sigma."""
    spread = ports.perfect_spread(plan("default"), trials=100)
    assert set(spread) == {"random", "orthogonal"}
    assert spread["orthogonal"] == 1.0
    assert abs(spread["random"] - 0.5) < 4 * math.sqrt(0.25 / 100)


def test_orthogonal_ports_follow_gors_degraded_groups(tmp_path):
    """Leaf b0l0 lost its cable to spine 0 (large fabric, 4 spines): GOR publishes
    groups without spine 0 for it; planned flows avoid spine 0 and stay spread."""
    import json

    p = plan("large")
    k = p.spec.spines
    lost = p.leaves[0].name
    groups = {lost: {leaf.name: [1, 2, 3] for leaf in p.leaves if leaf.name != lost}}
    path = tmp_path / "gor-topology.json"
    path.write_text(json.dumps({"version": 3, "groups": groups}))
    assert ports.load_groups(path) == groups
    assert ports.load_groups(tmp_path / "none.json") is None
    srcs = [n for n in p.nics() if n.leaf == lost]
    dsts = [n for n in p.nics() if n.block == 1 and n.rail == 0]
    flows = [(srcs[i].ip, dsts[i].ip) for i in range(3)]
    assigned = ports.orthogonal_ports(p, flows, seed=4, groups=groups)
    spines = [ports.uplink_of(p, s, d, assigned[(s, d)], groups) for s, d in flows]
    assert sorted(spines) == [1, 2, 3]
    # The same ports read without the groups would be predicted wrongly: the group
    # changes the modulus, which is why agents must use what GOR publishes.
    assert ports.members(p, *flows[0], groups) == (1, 2, 3)
    assert ports.members(p, *flows[0]) == tuple(range(k))
    with pytest.raises(ValueError, match="not in the ECMP group"):
        ports.port_for_spine(p, *flows[0], spine=0, start=50000, groups=groups)
    empty = {lost: {leaf.name: [] for leaf in p.leaves if leaf.name != lost}}
    with pytest.raises(ValueError, match="no spine left"):
        ports.orthogonal_ports(p, flows, seed=1, groups=empty)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="no `groups`"):
        ports.load_groups(bad)


def test_a_nics_leaf_from_its_address_is_the_plans():
    for spec in (FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=2),
                 FabricSpec(blocks=300, servers_per_block=2, rails=2, spines=2, pods=3, super_spines=1)):
        plan = AddressPlan(spec, emulated=False)
        assert all(ports._leaf_of(plan, nic.ip) == nic.leaf for nic in plan.nics())
        for bad in ("10.1", "10.0.0.300", "x", "10.9.0.1"):
            with pytest.raises(KeyError, match="is not a NIC address"):
                ports._leaf_of(plan, bad)


SCALE_FABRICS = Path(__file__).resolve().parent.parent / "scale" / "fabrics"


@pytest.mark.parametrize("spec", [FABRICS / "default.yaml", FABRICS / "three-tier.yaml",
                                  SCALE_FABRICS / "cluster-100k.yaml"])
def test_the_port_table_gives_every_flow_the_port_of_the_per_flow_search(spec):
    """The orthogonal plan's ports from one table of the range (`_distinct_ports_onto`)
    are those of `port_for_spine` run flow after flow, each avoiding the ports taken
    before it -- also where flows share a target and a start, so that the later ones
    must skip the earlier ones' ports (the search order: from the start, wrapping)."""
    p = AddressPlan(load_spec(spec, emulated=False), emulated=False)
    rng = random.Random(11)
    k, supers = p.spec.spines, p.spec.super_spines
    flows, spines, superspines, starts = [], [], [], []
    sources = [p.servers[i].nics[0] for i in range(0, len(p.servers), max(1, len(p.servers) // 40))]
    for n in range(400):
        a, b = rng.sample(sources, 2) if n % 40 else (sources[0], sources[-1])
        if a.leaf == b.leaf:
            continue
        flows.append((a.ip, b.ip, n))
        spines.append(rng.randrange(k) if n % 40 else 0)
        crosses = supers and p.pod_of(a.block) != p.pod_of(b.block)
        superspines.append((rng.randrange(supers) if n % 40 else 0) if crosses else None)
        # Every 40th flow: one pair, one target, one start -- each must skip the last's port.
        starts.append(rng.randint(49152, 65535) if n % 40 else 60000)
    used: set[int] = set()
    expected = []
    for (src, dst, _), spine, superspine, start in zip(flows, spines, superspines, starts):
        expected.append(ports.port_for_spine(p, src, dst, spine, start, used, None, superspine))
        used.add(expected[-1])
    assert len(flows) > 200 and len(set(expected)) == len(expected)
    assert ports._distinct_ports_onto(p, flows, spines, superspines, starts) == expected


@pytest.mark.parametrize("seed, n", [(1, 0), (1, 1), ("x/3", 1000), (7, 50_000)])
def test_ports_drawn_in_blocks_are_randints_of_the_same_generator(seed, n):
    """`draw_ports` gives exactly what n calls of randint over the port range give
    (the stock library's ports and the orthogonal plan's starts, as before)."""
    rng = random.Random(seed)
    expected = [rng.randint(49152, 65535) for _ in range(n)]
    assert ports.draw_ports(random.Random(seed), n).tolist() == expected


def test_many_nics_leaves_from_their_addresses_are_the_plans():
    """`_leaves_of` (one array for a job's NICs) gives `_leaf_of`'s leaf per address,
    and a non-NIC address among them is `_leaf_of`'s error."""
    spec = FabricSpec(blocks=300, servers_per_block=2, rails=2, spines=2, pods=3, super_spines=1)
    plan = AddressPlan(spec, emulated=False)
    ips = [nic.ip for nic in plan.nics()]
    assert ports._leaves_of(plan, ips) == {ip: ports._leaf_of(plan, ip) for ip in ips}
    for bad in ("10.1", "10.0.0.300", "x", "10.9.0.1"):
        with pytest.raises(KeyError, match="is not a NIC address"):
            ports._leaves_of(plan, ips[:3] + [bad])
