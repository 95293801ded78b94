"""Every benchmark module (`bench/bench_*.py`) imports and has its ``run()``.

`make bench` reports a benchmark that fails and goes on with the others, so a module
that no longer imports shows only as one FAILED line at the end of an 11-minute run:
bench_port_timing imported a pacing function bench_switch had replaced by its C sender,
and left its figures out of every `make bench` for two days."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
NAMES = sorted(m.name for m in pkgutil.iter_modules([str(BENCH)]) if m.name.startswith("bench_"))


def test_the_benchmarks_are_found() -> None:
    assert {"bench_switch", "bench_port_timing", "bench_fabric", "bench_nic"} <= set(NAMES), NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_benchmark_module_imports_and_has_run(name: str) -> None:
    assert callable(importlib.import_module(f"bench.{name}").run)
