"""The ECMP hash model against the data plane: the p4sim engine running p4src/astral.p4,
programmed by controller.routes, must pick exactly the uplink the model predicts."""

from __future__ import annotations

import ipaddress
import random

import numpy as np
import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from controller.routes import ALWAYS_MARK, MAX_QDEPTH, ecn_steps, switch_program
from fabric_sim import FabricSim, compiled
from p4sim.switch.match import Exact, Lpm
from p4sim.switch.v1model import V1Switch, run_to_completion
from topo.addressing import AddressPlan
from topo.hashmodel import (HASHES, PORT_RANGE, FiveTuple, ecmp_index, ecmp_indices, hash_input, path_via,
                            port_indices, ports_from, predict_path, source_port_for_spine, spine_uplink, uplink)
from topo.spec import EcnProfile, FabricSpec

SPEC = FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=2)


def test_algorithms_have_their_standard_check_values():
    # The CRC catalogue's check value: the algorithm over b"123456789".
    assert HASHES["crc32"](b"123456789") == 0xCBF43926
    assert HASHES["crc16"](b"123456789") == 0xBB3D


def test_hash_input_is_the_serialised_field_list():
    data = hash_input(0x01020304, FiveTuple("10.0.0.1", "10.1.2.3", 17, 0xABCD, 4791))
    assert data.hex() == "01020304" "0a000001" "0a010203" "11" "abcd" "12b7"
    # other protocols hash with zero ports
    assert hash_input(7, FiveTuple("10.0.0.1", "10.1.2.3", 1, 5, 6))[-4:] == bytes(4)


@pytest.mark.parametrize("algorithm", sorted(HASHES))
@pytest.mark.parametrize("size", [2, 3, 4, 7])
def test_engine_ecmp_index_equals_the_model(algorithm, size):
    """One leaf-like engine: ECMP group of ``size`` members, member i -> port 10+i."""
    sw = V1Switch(compiled(algorithm))
    salt = 0x5EED0000 + size
    sw.table_set_default("AstralIngress.switch_config", "AstralIngress.set_switch_config", [salt, 1, 0])
    sw.table_add("AstralIngress.ipv4_lpm", "AstralIngress.ecmp_select", [Lpm(0x0A000000, 8)], [1, size])
    for i in range(size):
        sw.table_add("AstralIngress.ecmp_nhop", "AstralIngress.forward", [Exact(1), Exact(i)], [10 + i, i])
    rng = random.Random(size)
    for _ in range(60):
        flow = FiveTuple(f"10.{rng.randrange(4)}.{rng.randrange(2)}.{rng.randrange(1, 250)}",
                         f"10.{rng.randrange(4)}.{rng.randrange(2)}.{rng.randrange(1, 250)}",
                         17, rng.randrange(65536), rng.choice([4791, rng.randrange(65536)]))
        frame = Ether() / IP(src=flow.src, dst=flow.dst) / UDP(sport=flow.sport, dport=flow.dport) / Raw(b"p" * 20)
        ((port, _),) = run_to_completion(sw, 1, bytes(frame))
        assert port - 10 == ecmp_index(algorithm, salt, flow, size), flow


@pytest.mark.parametrize("algorithm", ["crc32", "crc16"])
def test_paths_through_the_whole_fabric_equal_the_model(algorithm):
    """200 random 5-tuples between random NICs: the hop-by-hop path through ten
    programmed engines is the predicted path, with TTL and MACs rewritten per hop."""
    plan = AddressPlan(FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=2, ecmp_hash=algorithm))
    sim = FabricSim(plan)
    nics = list(plan.nics())
    rng = random.Random(4)
    spines_used = set()
    for _ in range(200):
        src, dst = rng.sample(nics, 2)
        flow = FiveTuple(src.ip, dst.ip, 17, rng.randrange(1024, 65536), 4791)
        frame = (Ether(src=src.mac, dst=plan.switch(src.leaf).mac) / IP(src=src.ip, dst=dst.ip, ttl=64)
                 / UDP(sport=flow.sport, dport=flow.dport) / Raw(b"r" * 16))
        path, out = sim.send(src.ip, bytes(frame))
        assert path == predict_path(plan, flow), flow
        delivered = Ether(out)
        assert delivered.dst == dst.mac and delivered.src == plan.switch(dst.leaf).mac
        assert delivered[IP].ttl == 64 - (len(path) - 2)
        spines_used.update(n for n in path if n.startswith("sp"))
    assert spines_used == {"sp0", "sp1"}


def test_ping_and_arp_through_the_fabric():
    plan = AddressPlan(SPEC)
    sim = FabricSim(plan)
    a, b = plan.server("b0h0").nics[0], plan.server("b1h1").nics[2]   # across rails and blocks
    path, out = sim.send(a.ip, bytes(Ether(src=a.mac, dst=plan.switch(a.leaf).mac)
                                     / IP(src=a.ip, dst=b.ip) / ICMP(id=1, seq=1)))
    assert path[0] == "b0h0" and path[-1] == "b1h1" and len(path) == 5
    assert Ether(out)[ICMP].type == 8
    path, out = sim.send(a.ip, bytes(Ether(src=a.mac, dst="ff:ff:ff:ff:ff:ff")
                                     / ARP(op=1, hwsrc=a.mac, psrc=a.ip, pdst=a.gateway_ip)))
    reply = Ether(out)[ARP]
    assert path == ["b0h0", "b0l0", "b0h0"]
    assert (reply.op, reply.hwsrc, reply.psrc, reply.pdst) == (2, plan.switch("b0l0").mac, a.gateway_ip, a.ip)
    # ARP for anything else is not answered
    path, out = sim.send(a.ip, bytes(Ether(src=a.mac, dst="ff:ff:ff:ff:ff:ff")
                                     / ARP(op=1, hwsrc=a.mac, psrc=a.ip, pdst="10.0.0.77")))
    assert out is None


def test_source_port_for_spine_steers_the_flow():
    plan = AddressPlan(SPEC)
    a, b = plan.server("b0h1").nics[1], plan.server("b1h0").nics[1]
    for spine in range(2):
        sport = source_port_for_spine(plan, FiveTuple(a.ip, b.ip), spine)
        assert predict_path(plan, FiveTuple(a.ip, b.ip, 17, sport, 4791))[2] == f"sp{spine}"


def test_port_search_wraps_skips_and_follows_the_group():
    plan = AddressPlan(SPEC)
    a, b = plan.server("b0h0").nics[0], plan.server("b1h1").nics[0]
    flow = FiveTuple(a.ip, b.ip)
    lo, hi = PORT_RANGE
    assert list(ports_from(hi - 1))[:3] == [hi - 1, hi, lo] and len(set(ports_from(hi))) == hi - lo + 1
    with pytest.raises(ValueError, match="starts in 49152..65535"):
        ports_from(1024)
    first = source_port_for_spine(plan, flow, 0)
    again = source_port_for_spine(plan, flow, 0, avoid={first})
    assert again > first and uplink(plan, FiveTuple(a.ip, b.ip, sport=again)) == 0
    # A group of the spines in the other order flips a two-spine choice; a one-member
    # group takes every port, so the search returns where it starts.
    assert uplink(plan, FiveTuple(a.ip, b.ip, sport=first), (1, 0)) == 1
    assert source_port_for_spine(plan, flow, 1, start=hi, members=(1,)) == hi
    assert predict_path(plan, FiveTuple(a.ip, b.ip, sport=hi), (1,)) == path_via(plan, flow, 1)
    with pytest.raises(ValueError, match="not in the ECMP group"):
        source_port_for_spine(plan, flow, 0, members=(1,))


def test_ecn_steps_follow_the_red_profile():
    steps = ecn_steps(EcnProfile(kmin=5, kmax=15, pmax=0.5))
    by_depth = {s.lo: s.threshold for s in steps if s.lo == s.hi}
    assert min(by_depth) == 6 and max(by_depth) == 14
    assert by_depth[10] == round(0.25 * ALWAYS_MARK)
    assert all(by_depth[q] < by_depth[q + 1] for q in range(6, 14))
    assert steps[-1].lo == 15 and steps[-1].hi == MAX_QDEPTH and steps[-1].threshold == ALWAYS_MARK


def test_leaf_and_spine_programs():
    plan = AddressPlan(SPEC)
    leaf = switch_program(plan, "b1l2")
    assert [r.prefix for r in leaf.routes] == ["10.2.1.1/32", "10.2.1.2/32", "10.0.0.0/8"]
    assert leaf.routes[-1].is_ecmp and leaf.routes[-1].size == 2
    assert [(h.index, h.port, h.mac) for h in leaf.next_hops] == [
        (0, 3, plan.switch("sp0").mac), (1, 4, plan.switch("sp1").mac)]
    assert leaf.arp[0].ip == "10.2.1.254"
    spine = switch_program(plan, "sp1")
    assert len(spine.routes) == 8 and not spine.next_hops and not spine.arp
    assert spine.routes[0].prefix == "10.0.0.0/24" and spine.routes[0].mac == plan.switch("b0l0").mac


@pytest.mark.parametrize("algorithm", sorted(HASHES))
def test_the_vectorised_hash_equals_the_scalar_one(algorithm):
    """`ecmp_indices` (numpy, the flow-level model's) is `ecmp_index` bit for bit:
    random salts, addresses, ports and group sizes, including the 16-bit truncation."""
    rng = random.Random(algorithm)
    n = 3000
    salts, srcs, dsts = ([rng.getrandbits(32) for _ in range(n)] for _ in range(3))
    sports = [rng.getrandbits(16) for _ in range(n)]
    sizes = [rng.choice([1, 2, 3, 8, 31, 32, 70000]) for _ in range(n)]
    got = ecmp_indices(algorithm, np.array(salts, dtype=np.uint64), np.array(srcs, dtype=np.uint64),
                       np.array(dsts, dtype=np.uint64), np.array(sports), np.array(sizes))
    want = [ecmp_index(algorithm, salt, FiveTuple(str(ipaddress.IPv4Address(s)), str(ipaddress.IPv4Address(d)),
                                                   sport=p), size)
            for salt, s, d, p, size in zip(salts, srcs, dsts, sports, sizes)]
    assert got.tolist() == want
    with pytest.raises(ValueError, match="at least one member"):
        ecmp_indices(algorithm, np.array([1]), np.array([1]), np.array([1]), np.array([1]), 0)


@pytest.mark.parametrize("algorithm", sorted(HASHES))
def test_the_port_search_is_the_scalar_search(algorithm):
    """`source_port_for_spine` (hashing every candidate port at once, `port_indices`)
    returns what trying `ports_from(start)` one by one with `ecmp_index` and
    `spine_uplink` returns, on two tiers and across pods, with ports to avoid."""
    two = AddressPlan(FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=3, ecmp_hash=algorithm))
    three = AddressPlan(FabricSpec(blocks=4, servers_per_block=2, rails=2, spines=2, pods=2, super_spines=4,
                                   ecmp_hash=algorithm))
    rng = random.Random(algorithm)
    for plan in (two, three):
        nics = list(plan.nics())
        for _ in range(40):
            a, b = rng.sample(nics, 2)
            if a.leaf == b.leaf:
                continue
            flow = FiveTuple(a.ip, b.ip)
            spine = rng.randrange(plan.spec.spines)
            across = plan.pod_of(a.block) != plan.pod_of(b.block)
            superspine = rng.randrange(plan.spec.super_spines) if across else None
            start = rng.randint(*PORT_RANGE)
            avoid = {rng.randint(*PORT_RANGE) for _ in range(2000)}

            def lands(sport):
                f = FiveTuple(a.ip, b.ip, sport=sport)
                return uplink(plan, f) == spine and (superspine is None or spine_uplink(plan, f, spine) == superspine)

            want = next(p for p in ports_from(start) if p not in avoid and lands(p))
            assert source_port_for_spine(plan, flow, spine, start, avoid, superspine=superspine) == want
            sports = np.array([rng.randint(*PORT_RANGE) for _ in range(50)])
            salt = plan.switch(a.leaf).salt
            assert port_indices(algorithm, salt, flow, sports, 7).tolist() == \
                [ecmp_index(algorithm, salt, FiveTuple(a.ip, b.ip, sport=int(p)), 7) for p in sports]
