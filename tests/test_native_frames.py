"""The C of the native switch that reads frames -- PAUSE parsing, MAC-control
detection, L4 checksum completion (p4sim/switch/native/loop.c) -- against the Python
reference (pause.py, ports.py) on the frame fuzzer's random and mutated frames, and the
same frames through it built with ``-fsanitize=address,undefined``. No namespaces: it
runs beside the namespace group (tests/conftest.py), not in it."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from p4sim.switch.native.libswitch import load
from p4sim.switch.pause import MAX_QUANTA, PRIORITIES, parse_pause, pfc_frame
from p4sim.switch.ports import complete_l4_checksum
from test_switch_fuzz_frames import base_frames, mutate


def fuzzed_frames(n: int) -> list[bytes]:
    rng, bases = random.Random(22), base_frames()
    pauses = [pfc_frame(b"\x02" * 6, {p: rng.randrange(MAX_QUANTA + 1)}) for p in range(PRIORITIES)]
    pauses.append(bytes.fromhex("0180c2000001" "020000000001" "8808" "0001" "0100") + bytes(42))
    pool = bases + pauses
    return pool + [mutate(rng, pool, 0) for _ in range(n)] + [f[:k] for f in pauses for k in (0, 13, 14, 17, 33)]


def c_parse(ffi, lib, frame: bytes) -> dict[int, int] | None:
    enabled, quanta = ffi.new("uint8_t *"), ffi.new("uint16_t[8]")
    if not lib.p4n_parse_pause(frame, len(frame), enabled, quanta):
        return None
    return {p: quanta[p] for p in range(PRIORITIES) if enabled[0] >> p & 1}


def test_pause_frames_and_checksums_as_the_python_ones():
    ffi, lib = load()
    frames = fuzzed_frames(3000)
    for frame in frames:
        assert bool(lib.p4n_is_mac_control(frame, len(frame))) == (len(frame) >= 14 and frame[12:14] == b"\x88\x08")
        assert c_parse(ffi, lib, frame) == parse_pause(frame), frame.hex()
        buf = ffi.new("uint8_t[]", frame)
        lib.p4n_complete_l4_checksum(buf, len(frame))
        assert ffi.buffer(buf, len(frame))[:] == complete_l4_checksum(frame), frame.hex()
    out = ffi.new("uint8_t[]", lib.P4N_MIN_FRAME)
    for p in range(PRIORITIES):
        for q in (0, 1, 0x1234, MAX_QUANTA):
            lib.p4n_pfc_frame(b"\x02\x00\x00\x00\x00\x07", p, q, out)
            assert ffi.buffer(out)[:] == pfc_frame(b"\x02\x00\x00\x00\x00\x07", {p: q})


CHILD = """
import sys
sys.path.insert(0, {tests!r})
assert "libasan" in open("/proc/self/maps").read(), "ASan runtime not loaded"
from p4sim.switch.native.libswitch import load
from test_native_frames import fuzzed_frames
ffi, lib = load({flags!r})
enabled, quanta = ffi.new("uint8_t *"), ffi.new("uint16_t[8]")
for frame in fuzzed_frames({n}):
    exact = ffi.new("uint8_t[]", len(frame) or 1)   # a read past the frame is past the buffer
    ffi.memmove(exact, frame, len(frame))
    lib.p4n_is_mac_control(exact, len(frame))
    lib.p4n_parse_pause(exact, len(frame), enabled, quanta)
    lib.p4n_complete_l4_checksum(exact, len(frame))
print("ok")
"""


def test_frame_reading_c_is_clean_under_asan_and_ubsan():
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                          check=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    flags = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")
    tests = Path(__file__).resolve().parent
    child = subprocess.run([sys.executable, "-c", CHILD.format(tests=str(tests), flags=flags, n=5000)],
                           capture_output=True, text=True, env=env, cwd=tests.parent, timeout=300)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr[-3000:]
    assert "runtime error" not in child.stderr and "AddressSanitizer" not in child.stderr
