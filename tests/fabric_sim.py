"""A whole fabric in one process: one p4sim engine per switch, programmed with
controller.routes' switch programs, packets walked along the addressing plan's links.

No root and no processes: it checks the P4 program, the route programs and the hash
model together, exactly as the switches would run them (minus the queues).
"""

from __future__ import annotations

import ipaddress
import random
from functools import lru_cache
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.routes import ECMP_ACTIONS, SwitchProgram, fabric_programs
from p4sim.compiler import compile_file
from p4sim.switch.match import Exact, Lpm, Range
from p4sim.switch.v1model import V1Switch, run_to_completion
from topo.addressing import AddressPlan
from topo.hashmodel import PORT_RANGE, FiveTuple
from topo.pipeline import hash_defines
from topo.spec import FabricSpec

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "astral.p4"


@lru_cache(maxsize=None)
def compiled(algorithm: str) -> dict:
    """BMv2 JSON of astral.p4 compiled for a fabric whose ``ecmp_hash`` is ``algorithm``
    (each tier's HashAlgorithm as `topo.pipeline` picks them; cached per run)."""
    spec = FabricSpec(blocks=1, servers_per_block=1, rails=1, spines=1, ecmp_hash=algorithm)
    return compile_file(str(PROGRAM), defines=hash_defines(spec)).bmv2_json


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def ip_int(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def install(sw: V1Switch, program: SwitchProgram) -> None:
    """Write a switch program with the engine's (BMv2 CLI-like) calls."""
    info = program.switch
    sw.table_set_default("AstralIngress.switch_config", "AstralIngress.set_switch_config",
                         [info.salt, info.switch_id, program.sample_rate])
    if program.alarms is not None:
        sw.table_set_default("AstralEgress.alarm_config", "AstralEgress.set_alarm_config",
                             list(program.alarms.action_params().values()))
    sw.mirroring_add(*program.clone_session)
    for hop in program.next_hops:
        sw.table_add("AstralIngress.ecmp_nhop", "AstralIngress.forward",
                     [Exact(hop.group), Exact(hop.index)], [hop.port, mac_int(hop.mac)])
    for route in program.routes:
        net = ipaddress.IPv4Network(route.prefix)
        match = [Lpm(int(net.network_address), net.prefixlen)]
        if route.is_ecmp:
            sw.table_add("AstralIngress.ipv4_lpm", f"AstralIngress.{ECMP_ACTIONS[route.tier]}", match,
                         [route.group, route.size])
        elif route.is_drop:
            sw.table_add("AstralIngress.ipv4_lpm", "AstralIngress.drop", match, [])
        else:
            sw.table_add("AstralIngress.ipv4_lpm", "AstralIngress.forward", match,
                         [route.port, mac_int(route.mac)])
    for step in program.ecn:
        sw.table_add("AstralEgress.ecn_threshold", "AstralEgress.set_mark_threshold",
                     [Range(step.lo, step.hi)], [step.threshold], priority=1)
    for answer in program.arp:
        sw.table_add("AstralIngress.arp_reply", "AstralIngress.arp_answer",
                     [Exact(ip_int(answer.ip))], [mac_int(answer.mac)])
    for port in program.sampled_ports:
        sw.table_add("AstralIngress.sampled_port", "NoAction", [Exact(port)], [])


class FabricSim:
    """Every switch of ``plan`` as an engine; `send` walks a frame to its destination."""

    def __init__(self, plan: AddressPlan) -> None:
        self.plan = plan
        pipeline = compiled(plan.spec.ecmp_hash)
        self.engines: dict[str, V1Switch] = {}
        for name, program in fabric_programs(plan).items():
            engine = V1Switch(pipeline, cpu_port=255)
            install(engine, program)
            self.engines[name] = engine

    def send(self, nic_ip: str, frame: bytes, max_hops: int = 8) -> tuple[list[str], bytes | None]:
        """Send ``frame`` out of the NIC with address ``nic_ip``; returns the nodes it
        visited (servers and switches) and the frame as delivered (None if dropped)."""
        nic = self.plan.nic(nic_ip)
        path = [nic.server]
        node, port, data = nic.leaf, nic.leaf_port, frame
        for _ in range(max_hops):
            path.append(node)
            outputs = [(p, d) for p, d in run_to_completion(self.engines[node], port, data) if p != 255]
            if not outputs:
                return path, None
            assert len(outputs) == 1, f"{node} sent copies to {[p for p, _ in outputs]}"
            out_port, data = outputs[0]
            node, port = self.plan.peer(node, out_port)
            if node not in self.engines:
                path.append(node)
                return path, data
        raise AssertionError(f"frame still in the fabric after {max_hops} hops: {path}")

    def send_udp(self, flow: FiveTuple, ttl: int = 64) -> tuple[list[str], Ether]:
        """Send one UDP frame of ``flow`` from its source NIC (to its leaf's MAC); the
        nodes it visited and the frame delivered, whose MACs and TTL were rewritten
        hop by hop (asserted here)."""
        src, dst = self.plan.nic(flow.src), self.plan.nic(flow.dst)
        frame = (Ether(src=src.mac, dst=self.plan.switch(src.leaf).mac) / IP(src=flow.src, dst=flow.dst, ttl=ttl)
                 / UDP(sport=flow.sport, dport=flow.dport) / Raw(b"u" * 16))
        path, out = self.send(src.ip, bytes(frame))
        assert out is not None, f"{flow} dropped at {path[-1]}"
        delivered = Ether(out)
        assert (delivered.dst, delivered.src) == (dst.mac, self.plan.switch(dst.leaf).mac), path
        assert delivered[IP].ttl == ttl - (len(path) - 2), path
        return path, delivered


def random_flows(plan: AddressPlan, n: int, seed: int) -> list[FiveTuple]:
    """``n`` RoCE flows between random pairs of NICs, with random dynamic source ports."""
    rng = random.Random(seed)
    nics = list(plan.nics())
    return [FiveTuple(src.ip, dst.ip, 17, rng.randint(*PORT_RANGE), 4791)
            for src, dst in (rng.sample(nics, 2) for _ in range(n))]
