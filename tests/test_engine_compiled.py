"""The engine on programs compiled by p4sim's own compiler (tests/p4/good)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.compiler import compile_file
from p4sim.switch.match import Exact, Lpm
from p4sim.switch.v1model import V1Switch

GOOD = Path(__file__).parent / "p4" / "good"


@pytest.mark.parametrize("program", sorted(p.name for p in GOOD.glob("*.p4")))
def test_every_good_program_loads(program):
    V1Switch(compile_file(str(GOOD / program)).bmv2_json)


def test_compiled_ecmp_forwards_by_crc32_of_the_five_tuple():
    sw = V1Switch(compile_file(str(GOOD / "ecmp.p4")).bmv2_json)
    sw.table_add("MyIngress.ecmp_group", "MyIngress.set_ecmp_select", [Lpm(0x0A010000, 16)], [0, 4])
    for member in range(4):
        sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(member)],
                     [0x000000000200 + (member << 8), 2 + member])
        sw.table_add("MyEgress.send_frame", "MyEgress.rewrite_mac", [Exact(2 + member)],
                     [0xE0 + member])
    for sport in range(2000, 2016):
        data = bytes(Ether() / IP(src="10.0.0.1", dst="10.1.0.5", ttl=9) / UDP(sport=sport, dport=4791))
        five = bytes([10, 0, 0, 1, 10, 1, 0, 5, 17]) + struct.pack("!HH", sport, 4791)
        member = zlib.crc32(five) % 4
        (port, out), = sw.process(1, data)
        assert port == 2 + member
        eth = Ether(out)
        assert eth.src == f"00:00:00:00:00:e{member}" and eth[IP].ttl == 8
