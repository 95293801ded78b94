"""The native engine (p4sim/switch/native/, ccodegen/) beside the Python one: the STF
corpus of tests/p4 on native, control-plane writes mirrored into the C tables, and
the choice between the engines (auto falls back to Python once, naming the construct;
native refuses with the same words)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from emulation.clock import EmulationClock
from p4sim.compiler import compile_file
from p4sim.stf.command import run_stf
from p4sim.switch import command
from p4sim.switch.ccodegen import Unsupported
from p4sim.switch.errors import P4AssertionError
from p4sim.switch.match import Exact, Lpm
from p4sim.switch.device import Device
from p4sim.switch.native.device import NativeDevice
from p4sim.switch.native.engine import NativeSwitch, make_engine
from p4sim.switch.v1model import V1Switch, run_to_completion

GOOD = Path(__file__).parent / "p4" / "good"
PROGRAMS = sorted(p for p in GOOD.glob("*.p4") if p.with_suffix(".stf").exists())
ECMP = Path(__file__).parent / "engine_fixtures" / "ecmp.json"
#: A program with a construct the C engine leaves to Python (docs/native-engine.md).
PYTHON_ONLY = Path(__file__).parent / "engine_fixtures" / "python_only.p4"
REFUSAL = "hash algorithm 'random' at calculations 'calc'"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_passes_its_stf_on_native(program: Path) -> None:
    """Every STF program of tests/p4 runs on native (varbit and 128-bit fields
    included) and passes there as on Python: none falls back."""
    out = io.StringIO()
    result = run_stf(str(program), str(program.with_suffix(".stf")), out=out, engine="native")
    assert result.passed, out.getvalue()


def udp(dst: str, sport: int) -> bytes:
    pkt = bytes(Ether(dst="00:00:00:00:00:aa") / IP(src="10.1.0.1", dst=dst, ttl=64)
                / UDP(sport=sport, dport=7))
    return pkt + bytes(64 - len(pkt))


def test_control_plane_writes_reach_the_c_tables() -> None:
    """Every write through the runtime API changes native forwarding as it changes Python's."""
    js = json.loads(ECMP.read_text())
    engines = [V1Switch(js), NativeSwitch(js)]
    packets = [udp(d, s) for d in ("10.1.0.9", "11.0.0.1", "172.16.0.1") for s in (1, 2, 3)]

    def same(step: str) -> None:
        py, nat = ([run_to_completion(sw, 1, p) for p in packets] for sw in engines)
        assert py == nat, step
        for name in ("MyIngress.port_pkts",):
            assert engines[0].counter_read(name, 1) == engines[1].counter_read(name, 1), step

    def both(call) -> list:
        return [call(sw) for sw in engines]

    same("no entries")
    both(lambda sw: sw.table_add("MyIngress.ecmp_group", "MyIngress.set_ecmp_select",
                                 [Lpm(0x0A000000, 8)], [0, 2]))
    for i, port in ((0, 1), (1, 2)):
        both(lambda sw: sw.table_add("MyIngress.ecmp_nhop", "MyIngress.set_nhop", [Exact(i)],
                                     [0x020000000001 + i, port]))
    same("routes")
    h, _ = both(lambda sw: sw.table_add("MyIngress.ecmp_group", "MyIngress.set_ecmp_select",
                                        [Lpm(0x0B000000, 8)], [1, 1]))
    same("added")
    both(lambda sw: sw.table_modify("MyIngress.ecmp_group", h, "MyIngress.set_ecmp_select", [0, 1]))
    same("modified")
    both(lambda sw: sw.table_delete("MyIngress.ecmp_group", h))
    same("deleted")
    both(lambda sw: sw.table_set_default("MyIngress.ecmp_group", "MyIngress.set_ecmp_select", [1, 1]))
    same("default set")
    both(lambda sw: sw.table_reset_default("MyIngress.ecmp_group"))
    same("default reset")
    both(lambda sw: sw.counter_write("MyIngress.port_pkts", 1, 7, 700))
    same("counter written")
    both(lambda sw: sw.counter_reset("MyIngress.port_pkts"))
    same("counters reset")
    both(lambda sw: sw.table_clear("MyIngress.ecmp_nhop"))
    same("cleared")
    assert engines[1].counter_read("MyIngress.port_pkts", 1)[0] > 0


def test_auto_falls_back_to_python_once_naming_the_construct(caplog) -> None:
    js = compile_file(str(PYTHON_ONLY)).bmv2_json
    with caplog.at_level(logging.WARNING):
        first = make_engine(js, "auto")
        make_engine(js, "auto")
    assert type(first) is V1Switch
    said = [r.getMessage() for r in caplog.records if "native engine" in r.getMessage()]
    assert len(said) == 1 and REFUSAL in said[0]
    with pytest.raises(Unsupported, match=re.escape(REFUSAL)):
        make_engine(js, "native")
    assert isinstance(make_engine(compile_file(str(GOOD / "basic_ipv4.p4")).bmv2_json, "auto"),
                      NativeSwitch)


def test_switch_engine_native_refuses_the_program_with_the_construct(tmp_path, capsys) -> None:
    path = tmp_path / "python_only.json"
    path.write_text(json.dumps(compile_file(str(PYTHON_ONLY)).bmv2_json))
    rc = command.main([str(path), "--engine", "native", "--grpc-server-addr", "127.0.0.1:0"])
    assert rc == 1
    assert REFUSAL in capsys.readouterr().err


def _open(json_path: Path | None, *flags: str) -> tuple:
    """command.open_device as `p4sim switch` calls it, on no interfaces."""
    argv = [str(json_path)] if json_path else ["--no-p4"]
    args = command.build_parser().parse_args([*argv, *flags])
    pipeline = command.load_json(str(json_path)) if json_path else None
    return command.open_device(args, {}, {}, None, EmulationClock.start(), pipeline)


def test_auto_decides_the_engine_before_the_device(tmp_path) -> None:
    """auto: a program the C engine runs gets the C loop too; one it does not gets the
    Python loop; with --no-p4 the C loop, which refuses such a program saying how."""
    good, python_only = tmp_path / "good.json", tmp_path / "python_only.json"
    good.write_text(json.dumps(compile_file(str(GOOD / "basic_ipv4.p4")).bmv2_json))
    python_only.write_text(json.dumps(compile_file(str(PYTHON_ONLY)).bmv2_json))
    cases = [(good, (), NativeDevice, NativeSwitch), (python_only, (), Device, V1Switch),
             (good, ("--engine", "python"), Device, V1Switch), (None, (), NativeDevice, type(None))]
    for path, flags, device_kind, engine_kind in cases:
        device, engine = _open(path, *flags)
        try:
            assert (type(device), type(engine)) == (device_kind, engine_kind), (path, flags)
            if path is None:
                with pytest.raises(Unsupported, match=re.escape(REFUSAL) + r".*--engine python"):
                    device.make_engine(command.load_json(str(python_only)))
        finally:
            device.close()


@pytest.mark.parametrize("frame, words", [(b"\x07", "assert failed"), (b"\xff\x00\x01", "assume failed")])
def test_a_failing_assertion_raises_as_in_python(frame: bytes, words: str) -> None:
    js = compile_file(str(GOOD / "log_assert.p4")).bmv2_json
    for sw in (V1Switch(js), NativeSwitch(js)):
        with pytest.raises(P4AssertionError, match=words):
            sw.run_ingress(0, frame)
        assert run_to_completion(sw, 0, b"\x07\x00\xff") == [(1, b"\x07\x01\x00")]


def test_loop_cpu_flag_names_a_core_of_the_process(capsys) -> None:
    """``--loop-cpu``: none leaves the loop free, last is the highest core this process
    may use, a number must be one of them; anything else stops the switch at start,
    naming the flag and the cores."""
    allowed = os.sched_getaffinity(0)
    assert command.parse_loop_cpu("none") is None
    assert command.parse_loop_cpu("last") == max(allowed)
    assert command.parse_loop_cpu(str(min(allowed))) == min(allowed)
    for bad in (str(max(allowed) + 1), "first", "-1"):
        with pytest.raises(command.UsageError, match=f"--loop-cpu '{bad}'"):
            command.parse_loop_cpu(bad)
    assert command.main(["--no-p4", "--loop-cpu", "4096", "--grpc-server-addr", "127.0.0.1:0"]) == 2
    assert f"one of this process's cores {sorted(allowed)}" in capsys.readouterr().err
