"""Fields wider than 64 bits and varbit fields on the native engine, against the
Python engine (the reference): tests/engine_fixtures/wide_fields.p4 gets
hypothesis-drawn table entries (exact, ternary, LPM and range on 128-bit keys, 128- and
72-bit action parameters), a write to a 128-bit register, and frames whose wide values lean on the edges (0, 2**64,
2**127, 2**128 - 1) and whose varbit lengths run past the header's maximum and past
the frame's end. Both engines must send the same bytes on the same ports, or fail the
packet alike, and end with the same register cells and digests."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from p4sim.compiler import compile_file
from p4sim.switch.match import Exact, Lpm, Range, Ternary
from p4sim.switch.native.engine import NativeSwitch
from p4sim.switch.v1model import V1Switch, run_to_completion

PROGRAM = Path(__file__).parent / "engine_fixtures" / "wide_fields.p4"
REGISTER = "MyIngress.acc"
TABLES = ("MyIngress.exact_a", "MyIngress.ternary_b", "MyIngress.lpm_key", "MyIngress.range_a")
EDGES = [0, 1, (1 << 64) - 1, 1 << 64, (1 << 127) - 1, 1 << 127, (1 << 128) - 1]
#: varbit<160>: 20 bytes at most; 21 and 22 must end the parser with HeaderTooShort
MAX_VARBIT_BYTES = 22


def wide(bits: int) -> st.SearchStrategy[int]:
    """Values of `bits` bits, the edges that fit drawn often."""
    return st.one_of(st.sampled_from([e for e in EDGES if e < 1 << bits] + [(1 << bits) - 1]),
                     st.integers(0, (1 << bits) - 1))


def pack(fields: list[tuple[int, int]]) -> bytes:
    """(value, width) fields back to back, MSB first (whole bytes in all)."""
    value, nbits = 0, 0
    for v, w in fields:
        value, nbits = (value << w) | v, nbits + w
    return value.to_bytes(nbits // 8, "big")


@st.composite
def frames(draw: st.DrawFn, keys: list[int]) -> bytes:
    """A frame of wide_fields.p4: its wide header, two varbit fields, a payload --
    `a` often one of the table keys `keys`, and the frame sometimes cut short."""
    a = draw(st.one_of(st.sampled_from(keys), wide(128)) if keys else wide(128))
    n1, n2 = draw(st.integers(0, MAX_VARBIT_BYTES)), draw(st.integers(0, MAX_VARBIT_BYTES))
    fields = [(draw(st.one_of(st.integers(0, 140), st.integers(0, 255))), 8), (a, 128),
              (draw(wide(128)), 128), (draw(wide(100)), 100), (draw(wide(4)), 4),
              (draw(wide(72)), 72), (n1, 8), (n2, 8)]
    v1 = draw(st.binary(min_size=n1, max_size=n1))
    v2 = draw(st.one_of(st.just(v1[:n2]), st.binary(min_size=n2, max_size=n2)))
    frame = pack(fields) + v1 + v2 + draw(st.binary(max_size=8))
    if draw(st.booleans()) and draw(st.booleans()):
        frame = frame[:draw(st.integers(0, len(frame)))]
    return frame


@st.composite
def entries(draw: st.DrawFn) -> list[tuple]:
    """(table, action, match, args, priority) for the four tables."""
    out: list[tuple] = []
    for _ in range(draw(st.integers(0, 4))):
        out.append(("MyIngress.exact_a", "MyIngress.set_wide", [Exact(draw(wide(128)))],
                    [draw(wide(128))], None))
    for _ in range(draw(st.integers(0, 4))):
        out.append(("MyIngress.ternary_b", "MyIngress.set_mid",
                    [Ternary(draw(wide(128)), draw(wide(128))), Exact(draw(st.integers(0, 255)))],
                    [draw(wide(72))], draw(st.integers(1, 5))))
    for _ in range(draw(st.integers(0, 4))):
        plen = draw(st.integers(0, 128))
        value = draw(wide(128)) & (((1 << 128) - 1) ^ (((1 << 128) - 1) >> plen))
        out.append(("MyIngress.lpm_key", "MyIngress.set_both", [Lpm(value, plen)],
                    [draw(wide(128)), draw(wide(72))], None))
    for _ in range(draw(st.integers(0, 4))):
        bounds = [sorted((draw(wide(w)), draw(wide(w)))) for w in (128, 72)]
        out.append(("MyIngress.range_a", "MyIngress.set_ranged",
                    [Range(lo, hi) for lo, hi in bounds], [draw(st.integers(0, 255))],
                    draw(st.integers(1, 5))))
    return out


@pytest.fixture(scope="module")
def engines() -> tuple[V1Switch, NativeSwitch]:
    js = compile_file(str(PROGRAM)).bmv2_json
    return V1Switch(js), NativeSwitch(js)


def outcome(sw: V1Switch, frame: bytes) -> object:
    """What the switch sends for `frame`, or the kind of failure it raises."""
    try:
        return run_to_completion(sw, 0, frame)
    except Exception as exc:  # noqa: BLE001 -- a lost packet is an outcome to compare
        return type(exc).__name__


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_wide_and_varbit_fields_forward_as_in_python(engines: tuple[V1Switch, NativeSwitch],
                                                    data: st.DataObject) -> None:
    python, native = engines
    for sw in engines:
        for table in TABLES:
            sw.table_clear(table)
    keys = []
    for table, action, match, args, prio in data.draw(entries()):
        try:
            python.table_add(table, action, match, args, prio)
        except Exception:  # noqa: BLE001 -- a duplicate key: Python refuses, so skip it
            continue
        native.table_add(table, action, match, args, prio)
        if table == "MyIngress.exact_a":
            keys.append(match[0].value)
        elif table == "MyIngress.range_a":
            keys.append(match[0].low)
    cell, value = data.draw(st.integers(0, 3)), data.draw(wide(128))
    for sw in engines:
        sw.register_write(REGISTER, cell, value)
    for frame in data.draw(st.lists(frames(keys), min_size=1, max_size=6)):
        assert outcome(native, frame) == outcome(python, frame), frame.hex()
    assert [native.register_read(REGISTER, i) for i in range(4)] == \
        [python.register_read(REGISTER, i) for i in range(4)]
    assert native.pop_digests() == python.pop_digests()


def test_the_fixture_reaches_every_table_and_both_varbit_paths(engines: tuple[V1Switch, NativeSwitch]) -> None:
    """The differential test above means something only if frames hit the tables and
    the varbit copies: one hand-made frame that does, on both engines alike."""
    python, native = engines
    a, b = (1 << 127) | 5, (1 << 128) - 1
    for sw in engines:
        for table in TABLES:
            sw.table_clear(table)
        sw.table_add("MyIngress.exact_a", "MyIngress.set_wide", [Exact(a)], [1 << 100], None)
        sw.table_add("MyIngress.ternary_b", "MyIngress.set_mid", [Ternary(b, 1 << 127), Exact(1)],
                     [(1 << 72) - 1], 1)
        sw.table_add("MyIngress.lpm_key", "MyIngress.set_both", [Lpm(b & ~((1 << 64) - 1), 64)],
                     [3, 7], None)
        sw.table_add("MyIngress.range_a", "MyIngress.set_ranged", [Range(a, a), Range(0, (1 << 72) - 1)],
                     [9], 1)
        sw.register_write(REGISTER, 1, 0)
    frame = pack([(1, 8), (a, 128), (b, 128), (0, 100), (0, 4), (0, 72), (2, 8), (2, 8)])
    frame += b"xy" + b"zw" + b"!"
    got = run_to_completion(native, 0, frame)
    assert got == run_to_completion(python, 0, frame)
    out = got[0][1]
    # op 1 copies v1 over v2 (header copy), so v2 is "xy" too; hits: all four tables
    assert out[57:61] == b"xyxy" and out[-2] == 7 and out[-8] == 9, out.hex()
    assert native.register_read(REGISTER, 1) == python.register_read(REGISTER, 1) == a
    frame = pack([(4, 8), (a, 128), (b, 128), ((1 << 100) - 3, 100), (0, 4), (0, 72), (0, 8), (0, 8)])
    python.pop_digests(), native.pop_digests()
    assert run_to_completion(native, 0, frame) == run_to_completion(python, 0, frame)
    assert native.pop_digests() == python.pop_digests() == [("learned_t", [(a, -3, 4)])]
