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
from p4sim.switch.v1model import V1Switch, run_to_completion

GOOD = Path(__file__).parent / "p4" / "good"


@pytest.mark.parametrize("program", sorted(p.name for p in GOOD.glob("*.p4")))
def test_every_good_program_loads(program):
    """The engine builds every object the compiled program declares: its actions, its
    tables with their keys and const entries, its externs and value sets."""
    js = compile_file(str(GOOD / program)).bmv2_json
    sw = V1Switch(js)
    tables = [t for pipeline in js["pipelines"] for t in pipeline["tables"]]
    assert set(sw.actions) == {a["id"] for a in js["actions"]}
    assert set(sw.tables) == {t["name"] for t in tables}
    for t in tables:
        table = sw.tables[t["name"]]
        assert [k.match_type for k in table.keys] == [k["match_type"] for k in t.get("key", [])], t["name"]
        assert len(table.entries) == len(t.get("entries", [])), t["name"]
    assert set(sw.profiles) == {p["name"] for pipeline in js["pipelines"] for p in pipeline.get("action_profiles", [])}
    assert set(sw.registers) == {r["name"] for r in js.get("register_arrays", [])}
    assert set(sw.counters) == {c["name"] for c in js.get("counter_arrays", []) if not c.get("is_direct")}
    assert set(sw.meters) == {m["name"] for m in js.get("meter_arrays", []) if not m.get("is_direct")}
    assert set(sw.value_sets) == {v["name"] for v in js.get("parse_vsets", [])}


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
        (port, out), = run_to_completion(sw, 1, data)
        assert port == 2 + member
        eth = Ether(out)
        assert eth.src == f"00:00:00:00:00:e{member}" and eth[IP].ttl == 8


WIDTHS = [3, 13, 24, 1, 7, 48, 16, 4, 4, 64, 8, 2, 6]  # 200 bits: 25 bytes
SIGNED = {1}  # the 13-bit field is int<13>


def _one_header_switch(path: Path, fields: str, ingress: str) -> V1Switch:
    """A compiled v1model program at ``path`` that parses one header ``h`` of
    ``fields``, runs ``ingress`` on it, sends it to port 1 and emits it."""
    path.write_text(f"""#include <core.p4>
#include <v1model.p4>
header h_t {{
{fields}
}}
struct headers {{ h_t h; }}
struct metadata {{ }}
parser P(packet_in p, out headers hdr, inout metadata m, inout standard_metadata_t s) {{
    state start {{ p.extract(hdr.h); transition accept; }}
}}
control C(inout headers hdr, inout metadata m) {{ apply {{ }} }}
control I(inout headers hdr, inout metadata m, inout standard_metadata_t s) {{
    apply {{
{ingress}
        s.egress_spec = 1;
    }}
}}
control E(inout headers hdr, inout metadata m, inout standard_metadata_t s) {{ apply {{ }} }}
control D(packet_out p, in headers hdr) {{ apply {{ p.emit(hdr.h); }} }}
V1Switch(P(), C(), I(), E(), C(), D()) main;
""")
    return V1Switch(compile_file(str(path)).bmv2_json)


def _fields_program(tmp_path: Path) -> V1Switch:
    fields = "\n".join(f"    {'int' if i in SIGNED else 'bit'}<{w}> f{i};" for i, w in enumerate(WIDTHS))
    bumps = "\n".join(f"        hdr.h.f{i} = hdr.h.f{i} + 1;" for i in range(len(WIDTHS)))
    return _one_header_switch(tmp_path / "fields.p4", fields, bumps)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fields_of_every_width_are_extracted_and_emitted_in_place(tmp_path, seed):
    """Each field, whatever its width and alignment, is read from and written back to
    its own bits: +1 on every field (wrapping) equals the same on the bit string."""
    import random

    sw = _fields_program(tmp_path)
    rnd = random.Random(seed)
    total = sum(WIDTHS)
    for _ in range(20):
        value = rnd.getrandbits(total)
        data = value.to_bytes(total // 8, "big") + b"\x99"
        expected, shift = 0, total
        for w in WIDTHS:
            shift -= w
            field = (value >> shift) & ((1 << w) - 1)
            expected |= ((field + 1) & ((1 << w) - 1)) << shift
        [(port, out)] = run_to_completion(sw, 0, data)
        assert port == 1 and out == expected.to_bytes(total // 8, "big") + b"\x99"


def test_long_control_chains_run_fused(tmp_path):
    """40 `if`s in a row (81 control nodes): a packet goes through them in a few calls
    of fused code, the generated code stays linear in the program, and the result is
    the one of running the nodes one by one."""
    import sys

    from p4sim.switch.codegen import controls

    ifs = "\n".join(f"        if (hdr.h.a[{i % 32}:{i % 32}] == 1) {{ hdr.h.b = hdr.h.b + {i + 1}; }}"
                    for i in range(40))
    sw = _one_header_switch(tmp_path / "chain.p4", "    bit<32> a; bit<32> b;", ifs)
    assert len(sw.source.splitlines()) < 81 * 4 * controls.MAX_FUSE_DEPTH
    calls = []

    def count(frame, event, arg):
        if event == "call" and frame.f_code.co_name.startswith("N_ingress_"):
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        run_to_completion(sw, 0, bytes(8))
    finally:
        sys.setprofile(None)
    assert 0 < len(calls) <= 81 // controls.MAX_FUSE_DEPTH + 2
    for a in (0, 0xFFFFFFFF, 0x0F0F1234):
        expected = sum(i + 1 for i in range(40) if (a >> (i % 32)) & 1) & 0xFFFFFFFF
        [(port, out)] = run_to_completion(sw, 0, a.to_bytes(4, "big") + bytes(4))
        assert port == 1 and int.from_bytes(out[4:8], "big") == expected
