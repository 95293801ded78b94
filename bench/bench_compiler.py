"""Compile time of the largest P4 program the project carries (``compile_s_largest``)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from p4sim.compiler import compile_file

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 3


def largest_program() -> Path:
    """The biggest .p4 source among the fabric program and the test corpus."""
    candidates = list((ROOT / "p4src").glob("*.p4")) + list((ROOT / "tests" / "p4" / "good").glob("*.p4"))
    return max(candidates, key=lambda p: p.stat().st_size)


def cold_cli_seconds(program: Path) -> float:
    """What a user waits for: ``p4sim compile`` in a fresh process (imports, grammar)."""
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "p4sim.cli", "compile", "-o", out,
                        "--p4runtime-files", f"{out}/p4info.txtpb", str(program)], check=True)
        return time.perf_counter() - started


def run() -> dict[str, float]:
    """Warm figure: best of a few compiles in one process (the parser tables loaded)."""
    program = largest_program()
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        compile_file(str(program))
        best = min(best, time.perf_counter() - started)
    print(f"# largest program: {program.relative_to(ROOT)}")
    return {"compile_s_largest": best, "compile_s_largest_cli": cold_cli_seconds(program)}
