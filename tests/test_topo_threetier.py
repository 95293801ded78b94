"""Three tiers: the spec's cluster tier, the addressing plan of pods and super-spines,
the hash model across pods, and the proof that the tiers' ECMP choices are independent
(chi-square) where a per-switch salt in front of one CRC is not."""

from __future__ import annotations

import ipaddress
import math
import random
import zlib
from collections import Counter

import finsy as fy
import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether

from controller.paths import candidate_paths, find_port, predict
from controller.routes import cable, entities, fabric_programs, switch_program
from fabric_sim import FabricSim, random_flows
from tccl.ports import orthogonal_ports
from topo.addressing import AddressPlan, nic_address, nic_location
from topo.pipeline import build_pipeline
from topo.hashmodel import (HASHES, PORT_RANGE, FiveTuple, ecmp_index, hash_input, path_via,
                            predict_path, source_port_for_spine, spine_uplink, tier_algorithm, uplink)
from topo.spec import FabricSpec, SpecError, parse_spec

# 2 pods x 2 blocks x 2 servers x 2 rails, 2 spines per pod, 2 super-spines per plane.
THREE = dict(blocks=4, servers_per_block=2, rails=2, spines=2, pods=2, super_spines=2)
PLAN = AddressPlan(FabricSpec(**THREE))


# --- spec ------------------------------------------------------------------------------

def test_three_tier_spec_sizes_and_oversubscription():
    spec = parse_spec({**THREE, "links": {"host_mbps": 10, "uplink_mbps": 10, "spine_uplink_mbps": 5}})
    assert (spec.tiers, spec.blocks_per_pod, spec.spine_switches, spec.super_spine_switches) == (3, 2, 4, 4)
    assert spec.switches == 8 + 4 + 4
    assert spec.leaf_oversubscription == 1.0
    assert spec.spine_oversubscription == (2 * 2 * 10) / (2 * 5)
    two = parse_spec({"blocks": 2, "servers_per_block": 2, "rails": 4, "spines": 2})
    assert (two.tiers, two.pods, two.super_spines, two.spine_oversubscription) == (2, 1, 0, None)
    assert two.links.spine_uplink_mbps == two.links.uplink_mbps


def test_oversubscription_derives_the_tier_uplink_rate():
    spec = parse_spec({**THREE, "links": {"host_mbps": 20}, "oversubscription": {"leaf": 2, "spine": 4}})
    assert spec.links.uplink_mbps == 2 * 20 / (2 * 2)
    assert spec.leaf_oversubscription == pytest.approx(2)
    assert spec.spine_oversubscription == pytest.approx(4)


@pytest.mark.parametrize("change, key, words", [
    ({"super_spines": 0}, "super_spines", "need at least 1"),
    ({"pods": 3}, "pods", "split evenly"),
    ({"pods": 0}, "pods", "at least 1"),
    ({"super_spines": -1}, "super_spines", ">= 0"),
    ({"super_spines": 60}, "super_spines", "ports"),
    ({"links": {"uplink_mbps": 5}, "oversubscription": {"leaf": 2}}, "oversubscription.leaf", "not both"),
    ({"oversubscription": {"spine": 0}}, "oversubscription.spine", "> 0"),
    ({"oversubscription": {"core": 1}}, "oversubscription.core", "unknown key"),
    ({"links": {"spine_uplink_mbps": -1}}, "links.spine_uplink_mbps", "> 0"),
])
def test_bad_three_tier_values_name_the_key(change, key, words):
    with pytest.raises(SpecError) as err:
        parse_spec({**THREE, **change}, "bad.yaml")
    assert str(err.value).startswith(f"bad.yaml: {key}: "), str(err.value)
    assert words in str(err.value)


def test_spine_oversubscription_needs_the_cluster_tier():
    with pytest.raises(SpecError, match="^bad.yaml: oversubscription.spine: needs .*super_spines"):
        parse_spec({"blocks": 2, "servers_per_block": 2, "rails": 2, "spines": 2,
                    "oversubscription": {"spine": 1}}, "bad.yaml")


# --- addressing ------------------------------------------------------------------------

def test_pods_spines_and_super_spines_are_numbered_and_wired():
    plan = PLAN
    assert [s.name for s in plan.spines] == ["sp0", "sp1", "sp2", "sp3"]
    assert [s.name for s in plan.super_spines] == ["ss0", "ss1", "ss2", "ss3"]
    ids = [sw.switch_id for sw in plan.switches]
    assert ids == list(range(1, 17)) and len({sw.mac for sw in plan.switches}) == 16
    assert [leaf.pod for leaf in plan.leaves] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert plan.spine(1, 0).name == "sp2" and (plan.spine(1, 0).pod, plan.spine(1, 0).spine) == (1, 0)
    assert plan.super_spine(1, 0).name == "ss2" and plan.super_spine(1, 0).spine == 1
    # leaf b3l1 (pod 1) -> spine 1 of pod 1 (sp3); sp3 -> super-spine 0 of plane 1 (ss2)
    assert plan.peer("b3l1", plan.uplink_port(1)) == ("sp3", plan.spine_port(3, 1))
    assert plan.spine_port(3, 1) == 1 + 1 * 2 + 1
    assert plan.peer("sp3", plan.spine_uplink_port(0)) == ("ss2", plan.super_port(1))
    assert sorted(plan.port_rates("sp3")) == [1, 2, 3, 4, 5, 6]
    assert sorted(plan.port_rates("ss2")) == [1, 2]
    g = plan.graph()
    assert g.number_of_edges() == 16 + 8 * 2 + 4 * 2
    assert g.nodes["ss0"]["role"] == "superspine"
    # spine k of each pod reaches only plane k's super-spines
    assert set(g["sp1"]) == {"b0l0", "b0l1", "b1l0", "b1l1", "ss2", "ss3"}


def test_pod_subnets_cover_exactly_the_pod():
    plan = PLAN
    assert plan.pod_subnets(1, 1) == ("10.1.2.0/23",)
    odd = AddressPlan(FabricSpec(blocks=6, servers_per_block=1, rails=1, spines=1, pods=2, super_spines=1))
    nets = [ipaddress.IPv4Network(n) for n in odd.pod_subnets(0, 1)]
    inside = {nic.ip for nic in odd.nics() if odd.pod_of(nic.block) == 1}
    assert {nic.ip for nic in odd.nics() if any(ipaddress.IPv4Address(nic.ip) in n for n in nets)} == inside


def test_a_100k_gpu_plan_is_arithmetic_not_objects():
    """25 pods x 16 blocks x 32 servers x 8 rails = 102 400 NICs: more blocks than an
    octet, so the block field widens; no per-NIC object is made until asked for."""
    spec = FabricSpec(blocks=400, servers_per_block=32, rails=8, spines=32, pods=25, super_spines=16)
    with pytest.raises(SpecError, match="ports"):
        AddressPlan(spec)
    plan = AddressPlan(spec, emulated=False)
    assert "servers" not in plan.__dict__ and len(plan.switches) == 3200 + 800 + 512
    # rail 7 << 9 | block 394 = 0xf8a: 10.15.138.x; server 31 is host 32
    nic = plan.nic("10.15.138.32")
    assert (nic.rail, nic.block, nic.index, nic.server, nic.leaf) == (7, 394, 31, "b394h31", "b394l7")
    assert nic.gateway_ip == "10.15.138.254" and nic.mac == "02:00:0a:0f:8a:20"
    assert "servers" not in plan.__dict__
    assert plan.rail_subnet(7) == "10.14.0.0/15"
    with pytest.raises(KeyError, match="not a NIC address"):
        plan.nic("10.16.0.1")            # rail 8 of an 8-rail fabric
    blocks, index, rails = [0, 255, 256, 399], [0, 5, 31, 7], [0, 3, 7, 1]
    addresses = [nic_address(spec, b, s, r) for b, s, r in zip(blocks, index, rails)]
    assert [nic_location(spec, a) for a in addresses] == list(zip(rails, blocks, index))


def test_two_tier_addresses_are_unchanged():
    plan = AddressPlan(FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=2))
    assert plan.rail_subnet(3) == "10.3.0.0/16" and plan.rail_block_subnet(3, 1) == "10.3.1.0/24"
    assert nic_address(plan.spec, 1, 0, 3) == int(ipaddress.IPv4Address("10.3.1.1"))


# --- hash model ------------------------------------------------------------------------

def _flows_across_pods(plan: AddressPlan, n: int, seed: int) -> list[FiveTuple]:
    rng = random.Random(seed)
    pods = [[nic for nic in plan.nics() if plan.pod_of(nic.block) == p] for p in range(plan.spec.pods)]
    return [FiveTuple(rng.choice(pods[0]).ip, rng.choice(pods[1]).ip, 17, rng.randint(*PORT_RANGE), 4791)
            for _ in range(n)]


def test_paths_across_pods_climb_to_a_super_spine_of_the_leafs_plane():
    plan = PLAN
    seen = set()
    for flow in _flows_across_pods(plan, 200, 1):
        path = predict_path(plan, flow)
        k = uplink(plan, flow)
        j = spine_uplink(plan, flow, k)
        assert path == path_via(plan, flow, k, j) and len(path) == 7
        assert path[2] == plan.spine(0, k).name and path[3] == plan.super_spine(k, j).name
        assert path[4] == plan.spine(1, k).name and path[5] == plan.nic(flow.dst).leaf
        seen.add((k, j))
    assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}
    inside = FiveTuple(plan.server("b0h0").nics[0].ip, plan.server("b1h1").nics[1].ip, sport=50000)
    assert len(predict_path(plan, inside)) == 5 and predict_path(plan, inside)[2] in ("sp0", "sp1")


def test_source_port_search_reaches_every_path_across_pods():
    plan = PLAN
    a, b = plan.server("b0h1").nics[1], plan.server("b3h0").nics[0]
    for k in range(2):
        for j in range(2):
            sport = source_port_for_spine(plan, FiveTuple(a.ip, b.ip), k, superspine=j)
            assert predict_path(plan, FiveTuple(a.ip, b.ip, 17, sport, 4791)) == \
                [a.server, a.leaf, plan.spine(0, k).name, plan.super_spine(k, j).name,
                 plan.spine(1, k).name, b.leaf, b.server]
    with pytest.raises(ValueError, match="does not cross pods"):
        source_port_for_spine(plan, FiveTuple(a.ip, plan.server("b1h0").nics[0].ip), 0, superspine=0)


def test_tiers_hash_with_different_crcs():
    spec = PLAN.spec
    assert tier_algorithm(spec, "leaf") == "crc32" and tier_algorithm(spec, "spine") == "crc16"
    assert tier_algorithm(FabricSpec(**THREE, ecmp_hash="crc16"), "spine") == "crc32"
    with pytest.raises(ValueError, match="no ECMP choice"):
        tier_algorithm(spec, "superspine")


# --- independence of the tiers' choices ------------------------------------------------

def _chi2_sf(x: float, dof: int) -> float:
    """P(chi2 with ``dof`` degrees of freedom >= x): the regularized upper incomplete
    gamma Q(dof/2, x/2), by its series below a+1 and its continued fraction above."""
    a, z = dof / 2, x / 2
    if z <= 0:
        return 1.0
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:
        term = total = 1 / a
        n = a
        while term > total * 1e-15:
            n += 1
            term *= z / n
            total += term
        return 1 - math.exp(log_front) * total
    b, c, d = z + 1 - a, 1e300, 1 / (z + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = 1 / (an * d + b)
        c = b + an / c
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def _independence_p(pairs: list[tuple[int, int]]) -> float:
    """Pearson's chi-square test of independence of the two coordinates of ``pairs``."""
    counts, n = Counter(pairs), len(pairs)
    rows, cols = Counter(p[0] for p in pairs), Counter(p[1] for p in pairs)
    stat = sum((counts[(r, c)] - rows[r] * cols[c] / n) ** 2 / (rows[r] * cols[c] / n)
               for r in rows for c in cols)
    return _chi2_sf(stat, max(1, (len(rows) - 1) * (len(cols) - 1)))


def test_chi2_survival_matches_known_quantiles():
    assert _chi2_sf(3.841459, 1) == pytest.approx(0.05, rel=1e-5)
    assert _chi2_sf(6.634897, 1) == pytest.approx(0.01, rel=1e-5)
    assert _chi2_sf(16.918978, 9) == pytest.approx(0.05, rel=1e-5)
    assert _chi2_sf(2.087901, 9) == pytest.approx(0.99, rel=1e-5)


# A seeded, deterministic test: it cannot flake. alpha = 0.01 is the usual bar for
# "no evidence of dependence", family-wise over the leaves of a fabric (Bonferroni:
# each leaf's p-value against alpha / leaves) -- independent choices give p-values
# uniform in (0, 1), so a seed failing it would be a 1-in-100 accident, while locked
# choices give a statistic of about n (p below 1e-300 at n = 4000), failing any alpha.
ALPHA = 0.01
FLOWS = 4000


def _flows_from_leaf(plan: AddressPlan, leaf: str, n: int, seed: int) -> list[FiveTuple]:
    """``n`` flows from the NICs of ``leaf`` to random NICs of the other pod, with
    random source ports: what one leaf sends up."""
    rng = random.Random(f"{seed}/{leaf}")
    mine = [nic for nic in plan.nics() if nic.leaf == leaf]
    pod = plan.switch(leaf).pod
    far = [nic for nic in plan.nics() if plan.pod_of(nic.block) != pod]
    return [FiveTuple(rng.choice(mine).ip, rng.choice(far).ip, 17, rng.randint(*PORT_RANGE), 4791)
            for _ in range(n)]


def _pod0_leaves(plan: AddressPlan) -> list[str]:
    return [leaf.name for leaf in plan.leaves if leaf.pod == 0]


@pytest.mark.parametrize("spines, supers", [(2, 2), (4, 4), (2, 3)])
def test_leaf_and_spine_choices_are_independent(spines, supers):
    """For every leaf, over many flows it sends across pods, the spine it sends a flow
    up and the super-spine that spine sends it on are independent."""
    plan = AddressPlan(FabricSpec(blocks=4, servers_per_block=2, rails=2, spines=spines, pods=2,
                                  super_spines=supers))
    for leaf in _pod0_leaves(plan):
        pairs = []
        for flow in _flows_from_leaf(plan, leaf, FLOWS, spines * 10 + supers):
            k = uplink(plan, flow)
            pairs.append((k, spine_uplink(plan, flow, k)))
        assert _independence_p(pairs) > ALPHA / len(_pod0_leaves(plan)), leaf


def _salted_same_crc(plan: AddressPlan, flow: FiveTuple) -> tuple[int, int]:
    """The counter-example, computed here and nowhere in the product: both tiers run
    the leaves' CRC, told apart only by their salts prefixed to the input."""
    crc = HASHES[plan.spec.ecmp_hash]
    leaf = plan.switch(plan.nic(flow.src).leaf)
    k = crc(hash_input(leaf.salt, flow)) % plan.spec.spines
    spine = plan.spine(plan.pod_of(plan.nic(flow.src).block), k)
    return k, crc(hash_input(spine.salt, flow)) % plan.spec.super_spines


@pytest.mark.parametrize("spines, supers", [(2, 2), (4, 4)])
def test_salt_prefixed_crc_fails_the_same_test(spines, supers):
    plan = AddressPlan(FabricSpec(blocks=4, servers_per_block=2, rails=2, spines=spines, pods=2,
                                  super_spines=supers))
    for leaf in _pod0_leaves(plan):
        flows = _flows_from_leaf(plan, leaf, FLOWS, spines * 10 + supers)
        pairs = [_salted_same_crc(plan, flow) for flow in flows]
        assert _independence_p(pairs) < ALPHA / len(_pod0_leaves(plan)), leaf
    # Why: CRC is linear, so the XOR of two salted CRCs is one constant for every flow.
    a, b = plan.leaves[0].salt, plan.spines[0].salt
    assert len({zlib.crc32(hash_input(a, f)) ^ zlib.crc32(hash_input(b, f)) for f in flows}) == 1
    # and the leaf's choice under the product's hashing is what this counter-example's is
    assert all(uplink(plan, f) == k for f, (k, _) in zip(flows[:200], pairs))


def _linear_rows(fn, nbytes: int, width: int) -> list[int]:
    """The linear part of a CRC over ``nbytes`` inputs as ``width`` rows of input bits."""
    zero = fn(bytes(nbytes))
    cols = [fn((1 << i).to_bytes(nbytes, "big")) ^ zero for i in range(8 * nbytes)]
    return [sum(((c >> r) & 1) << i for i, c in enumerate(cols)) for r in range(width)]


def _rank_gf2(rows: list[int]) -> int:
    basis: dict[int, int] = {}
    for row in rows:
        while row:
            top = row.bit_length() - 1
            if top not in basis:
                basis[top] = row
                break
            row ^= basis[top]
    return len(basis)


def test_spine_hash_is_no_function_of_the_leaf_hash():
    """Structurally: over the 17-byte field list, the rows of CRC-16's linear map are
    linearly independent of CRC-32's, so no map of a leaf's CRC gives its spine's."""
    crc32, crc16 = _linear_rows(HASHES["crc32"], 17, 32), _linear_rows(HASHES["crc16"], 17, 16)
    assert _rank_gf2(crc32) == 32 and _rank_gf2(crc32 + crc16) == 48
    # a salt in front changes no row: the same linear map, only the constant moves
    salted = _linear_rows(lambda d: zlib.crc32(b"\x12\x34\x56\x78" + d[4:]), 17, 32)
    unsalted = _linear_rows(lambda d: zlib.crc32(b"\xab\xcd\xef\x01" + d[4:]), 17, 32)
    assert salted == unsalted


# --- the data plane --------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["crc32", "crc16"])
def test_paths_through_the_three_tier_fabric_equal_the_model(algorithm):
    """300 random 5-tuples between random NICs through sixteen programmed engines: the
    hop-by-hop path is the predicted one (leaves and spines hashing with their own
    CRCs, bit for bit), MACs and TTL rewritten at every hop."""
    plan = AddressPlan(FabricSpec(**THREE, ecmp_hash=algorithm))
    sim = FabricSim(plan)
    climbed = set()
    for flow in random_flows(plan, 300, 13):
        path, _ = sim.send_udp(flow)
        assert path == predict_path(plan, flow), flow
        climbed.update([(path[2], path[3])] if len(path) == 7 else [])
    # every (spine, super-spine) pair of pod 0 and pod 1 going up is used
    assert len(climbed) == 2 * 2 * 2


def test_ping_crosses_pods_and_a_lost_leaf_is_dropped_not_bounced():
    plan = PLAN
    a, b = plan.server("b0h0").nics[0], plan.server("b3h1").nics[1]
    frame = bytes(Ether(src=a.mac, dst=plan.switch(a.leaf).mac) / IP(src=a.ip, dst=b.ip) / ICMP(id=1, seq=1))
    path, out = FabricSim(plan).send(a.ip, frame)
    assert path[0] == "b0h0" and path[-1] == "b3h1" and len(path) == 7 and path[3].startswith("ss")
    assert Ether(out)[ICMP].type == 8
    # The spine of plane 0 in pod 1 lost its cable to b3l1: it drops what comes down for it.
    spine = plan.spine(1, 0).name
    program = switch_program(plan, spine, frozenset({cable(spine, "b3l1")}))
    lost = [r for r in program.routes if r.prefix == plan.rail_block_subnet(1, 3)]
    assert len(lost) == 1 and lost[0].is_drop
    assert [r.tier for r in program.routes if r.is_ecmp] == ["spine"]


def test_programs_of_every_tier_encode_against_the_p4info(tmp_path):
    schema = fy.P4Schema(build_pipeline(PLAN.spec, tmp_path).p4info)
    actions = set()
    for program in fabric_programs(PLAN).values():
        for message in (e.encode(schema) for e in entities(program)):
            if message.HasField("table_entry") and message.table_entry.action.HasField("action"):
                actions.add(schema.actions[message.table_entry.action.action.action_id].alias)
    assert {"ecmp_select", "spine_ecmp_select", "forward"} <= actions


# --- GOR's path search and TCCL's orthogonal ports across pods ---------------------------

def test_gor_candidates_are_every_spine_and_super_spine_and_ports_land_on_each():
    plan = PLAN
    a, b = plan.server("b1h0").nics[0], plan.server("b2h1").nics[0]
    flow = FiveTuple(a.ip, b.ip, sport=50000)
    paths = candidate_paths(plan, flow)
    assert sorted((p[2], p[3]) for p in paths) == [("sp0", "ss0"), ("sp0", "ss1"), ("sp1", "ss2"), ("sp1", "ss3")]
    assert predict(plan, flow) in paths
    for path in paths:
        sport = find_port(plan, flow, path)
        assert predict(plan, FiveTuple(a.ip, b.ip, sport=sport)) == path
    # a failed leaf-spine cable leaves the paths through the other plane
    down = frozenset({cable("b1l0", "sp0")})
    assert {p[2] for p in candidate_paths(plan, flow, down)} == {"sp1"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_orthogonal_ports_put_one_flow_on_every_uplink_of_both_tiers(seed):
    """Pod 0's rail-0 leaves each send two flows to pod 1: every leaf uplink, every
    spine uplink and every super-spine downlink carries exactly one."""
    plan = PLAN
    flows = [(plan.server_at(b, 0).nics[0].ip, plan.server_at(b + 2, 0).nics[0].ip, qp)
             for b in (0, 1) for qp in (0, 1)]
    ports = orthogonal_ports(plan, flows, seed)
    per_link = Counter()
    for f in flows:
        path = predict_path(plan, FiveTuple(f[0], f[1], sport=ports[f]))
        per_link.update(zip(path[1:-2], path[2:-1]))
    ups = [(leaf.name, plan.spine(0, k).name) for leaf in plan.leaves[:4:2] for k in range(2)]
    spine_ups = [(plan.spine(0, k).name, plan.super_spine(k, j).name) for k in range(2) for j in range(2)]
    super_downs = [(plan.super_spine(k, j).name, plan.spine(1, k).name) for k in range(2) for j in range(2)]
    assert [per_link[link] for link in ups + spine_ups + super_downs] == [1] * 12, per_link
