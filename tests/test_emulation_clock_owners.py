"""Every timed component of the fabric reads emulated time from the `EmulationClock` it
is given, never a system clock on its own (issue: "the clock is one object every timed
component takes"). A static check over the modules that time packets, timers and
ticks: a call to a system clock there is either absent or listed below with why it is
wall time on purpose (a label, not a timer)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The modules whose timing is emulated time: the switches' loop and traffic manager,
# the agents' loop, QPs and DCQCN, GOR's loop, moves, alarms and telemetry, the
# experiment recorder.
TIMED = ("p4sim/switch/device.py", "p4sim/switch/traffic_manager.py", "tccl/engine.py", "tccl/qp.py",
         "tccl/dcqcn.py", "controller/gor.py", "controller/moves.py", "controller/alarms.py",
         "controller/telemetry.py", "experiments/recorder.py")
SYSTEM_CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns",
                 "clock_gettime", "clock_gettime_ns", "sleep"}
# (module, function called) -> why it is not emulated time.
WALL_ON_PURPOSE = {
    ("tccl/engine.py", "time_ns"): "a QP's creation stamp: an identity GOR compares, not a time",
    ("experiments/recorder.py", "time"): "the wall-clock label of a telemetry round, beside its emulated time",
}


def system_clock_calls(path: Path) -> list[tuple[str, int]]:
    """(function, line) of every ``time.<clock>()`` call in the module."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "time" \
                and node.func.attr in SYSTEM_CLOCKS:
            calls.append((node.func.attr, node.lineno))
    return calls


def test_timed_components_read_only_the_emulation_clock():
    found = {(module, fn): line for module in TIMED for fn, line in system_clock_calls(ROOT / module)}
    unexplained = {f"{m}:{line}: time.{fn}()" for (m, fn), line in found.items() if (m, fn) not in WALL_ON_PURPOSE}
    assert not unexplained, "read the fabric's EmulationClock instead: " + ", ".join(sorted(unexplained))
    # The list stays honest: every exception is still there.
    assert set(WALL_ON_PURPOSE) <= set(found)


def test_the_check_sees_a_system_clock(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import time\n\ndef f():\n    return time.monotonic() + time.sleep(1)\n")
    assert sorted(system_clock_calls(module)) == [("monotonic", 4), ("sleep", 4)]
