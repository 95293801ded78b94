"""The generated C on hostile input: astral.p4's pipeline built with
``-fsanitize=address,undefined`` (no recovery: the first report aborts), with a leaf's
entries, takes the frame fuzzer's random and mutated frames through ingress and egress
in a child Python that preloads the ASan runtime (a sanitized library cannot be
loaded otherwise); programs with header stacks, varbit and wide fields follow. The child must finish cleanly,
with no sanitizer report; it first proves the sanitizer is armed by finding libasan in
its own memory map."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuzzkit import count

FRAMES = int(os.environ.get("P4SIM_FUZZ_FRAMES", "3000"))
TESTS = Path(__file__).resolve().parent
#: Programs with header stacks and unions, varbit and wide fields, fuzzed after astral.p4
#: (a tenth of the frames each).
STACKED = ("tests/p4/good/header_stack_ops.p4", "tests/p4/good/source_routing.p4",
           "tests/p4/good/mri.p4", "tests/p4/good/union_stack_runtime.p4",
           "tests/p4/good/varbit_assign.p4", "tests/p4/good/union_stack_varbit_next.p4",
           "tests/engine_fixtures/wide_fields.p4")

CHILD = textwrap.dedent("""
    import random, sys
    sys.path.insert(0, {tests!r})
    assert "libasan" in open("/proc/self/maps").read(), "ASan runtime not loaded"
    from controller.routes import fabric_programs
    from fabric_sim import compiled, install
    from p4sim.switch.native.engine import NativeSwitch
    from test_native_differential import SPEC
    from test_switch_fuzz_frames import base_frames, mutate
    from topo.addressing import AddressPlan, CPU_PORT
    sw = NativeSwitch(compiled(SPEC.ecmp_hash), cpu_port=CPU_PORT, sanitize=True)
    install(sw, fabric_programs(AddressPlan(SPEC))["b0l0"])
    rng, bases, sent = random.Random(5), base_frames(), 0
    for i in range({frames}):
        frame = bases[i] if i < len(bases) else mutate(rng, bases, 0)
        pending = list(sw.run_ingress(rng.choice([1, 2, 3, CPU_PORT]), frame))
        for job in pending:
            out, more = sw.run_egress(job, rng.randrange(64), 0, i, 0)
            sent += len(out)
            pending += more
    # header stacks (run-time indexes, push/pop, extraction into the next element),
    # varbit lengths from the frame, 128-bit arithmetic
    from p4sim.compiler import compile_file
    from p4sim.switch.errors import ProgramError
    for name in {stacked!r}:
        sw = NativeSwitch(compile_file(name).bmv2_json, sanitize=True)
        for i in range({frames} // 10):
            try:  # a stack index out of range loses the packet, as Python's IndexError
                pending = list(sw.run_ingress(rng.randrange(4), mutate(rng, bases, 0)))
                for job in pending:
                    out, more = sw.run_egress(job, 0, 0, i, 0)
                    pending += more
            except ProgramError:
                pass
    print("sent", sent)
""")


@pytest.mark.timeout(max(300, FRAMES // 100 + 20))
def test_generated_c_survives_fuzzed_frames_under_asan_and_ubsan() -> None:
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                          text=True, check=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=asan, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    child = subprocess.run([sys.executable, "-c", CHILD.format(tests=str(TESTS), frames=FRAMES, stacked=STACKED)],
                           capture_output=True, text=True, env=env, cwd=TESTS.parent,
                           timeout=max(280, FRAMES // 100))
    report = child.stderr[-3000:]
    assert child.returncode == 0, f"sanitized pipeline failed:\n{report}"
    assert "runtime error" not in child.stderr and "AddressSanitizer" not in child.stderr, report
    assert int(child.stdout.split()[-1]) > 0, "no frame left the switch"
    count("sanitized_frames", FRAMES)
