"""The native NIC built with -fsanitize=address,undefined, fuzzed (tests/nic_fuzz.py):
random and mutated frames, hostile ring headers and requests. Any out-of-bounds access,
use after free or undefined operation aborts the process with a report.
``P4SIM_FUZZ_FRAMES`` (make fuzz) makes the campaign long."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tccl.nic.build import sanitizer_env

HERE = Path(__file__).resolve().parent
FRAMES = int(os.environ.get("P4SIM_FUZZ_FRAMES", "20000"))


def test_fuzzed_frames_and_requests_under_asan_and_ubsan():
    env = {**os.environ, **sanitizer_env()}
    proc = subprocess.run([sys.executable, str(HERE / "nic_fuzz.py"), str(FRAMES), "1"], env=env,
                          capture_output=True, text=True, timeout=600, cwd=HERE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "ERROR: AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr
    assert f"nic fuzz: {FRAMES} frames" in proc.stdout


def test_the_sanitizer_build_catches_an_overflow():
    """The campaign above can fail: the same build aborts on a read past a buffer."""
    code = ("from tccl.nic import qp as n\n"
            "buf = n.ffi.new('uint8_t[]', 60)\n"
            "n.lib.nic_icrc(buf, 200)\n")
    env = {**os.environ, **sanitizer_env()}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=HERE.parent)
    assert proc.returncode != 0 and "AddressSanitizer" in proc.stderr
