"""What the fuzz and fault tests share: the figures of the campaigns (issue 15 part 2),
one tally per test run, and byte-level mutation of serialized requests and frames.

The fuzz and fault tests count what they sent and what went wrong here, so a run ends
with one closing note (printed by tests/conftest.py) instead of each test printing its
own: requests fuzzed with the crashes, hangs, internal errors and corrupted states
seen, frames fuzzed, faults injected and survived. The tests assert the zero-counts
themselves; the note is the figure for the report (`make fuzz` runs them long).
"""

from __future__ import annotations

from collections import Counter

# name -> count; the names are the closing note's rows, in this order, in groups (a
# group's rows are printed when the run counted any of them).
FIGURES: Counter[str] = Counter()
ROWS = (
    ("p4runtime", "requests_fuzzed", "P4Runtime requests fuzzed (Write/Read/pipeline/raw bytes/stream)"),
    ("p4runtime", "updates_fuzzed", "  of which Write updates"),
    ("p4runtime", "crashes", "  crashes (server gone)"),
    ("p4runtime", "hangs", "  hangs (no answer within the deadline)"),
    ("p4runtime", "internal_errors", "  INTERNAL/UNKNOWN answers to malformed requests"),
    ("p4runtime", "corrupted_states", "  read-backs differing from what the accepted updates built"),
    ("frames", "frames_fuzzed", "frames fuzzed into a running p4sim switch (astral.p4)"),
    ("frames", "frames_crashes", "  crashes (switch process gone)"),
    ("frames", "frames_hangs", "  hangs (a chunk's marker not forwarded in time)"),
    ("frames", "frames_host", "  into a host-facing port"),
    ("frames", "frames_fabric", "  into a fabric-facing port"),
    ("frames", "frames_cpu", "  into the CPU port (PacketOut)"),
    ("frames", "frames_kernel_dropped", "  dropped by the kernel before the switch read them"),
    ("frames", "forwarding_changed", "  known flows forwarded differently afterwards"),
    ("native", "native_frames", "frames through both switch engines (astral.p4, every switch's entries)"),
    ("native", "native_differences", "  differences (frames, ports, order, counters, registers, digests)"),
    ("native", "sanitized_frames", "fuzzed frames through the native pipeline built with ASan+UBSan"),
    ("control", "control_fuzzed", "malformed control-channel messages (agents, GOR's PacketIns)"),
    ("control", "control_internal_errors", "  INTERNAL/UNKNOWN answers or exceptions"),
    ("faults", "faults_injected", "faults injected into a running fabric with GOR"),
    ("faults", "faults_flaps", "  of which cable state changes (every 100 ms)"),
    ("faults", "faults_survived", "  survived (GOR up, state re-pushed, job done or failed ranks named)"),
    ("faults", "left_running", "  processes or namespaces left behind"),
)


def count(name: str, n: int = 1) -> None:
    """Add ``n`` to figure ``name`` (one of `ROWS`)."""
    assert any(name == row for _, row, _ in ROWS), f"unknown fuzz figure {name!r}"
    FIGURES[name] += n


def closing_note() -> list[str]:
    """The figures as lines, the rows this run touched (empty: no fuzz test ran)."""
    touched = {group for group, name, _ in ROWS if FIGURES[name]}
    return [f"{label:<72} {FIGURES[name]}" for group, name, label in ROWS if group in touched]


def overwrite(data: bytes, writes: list[tuple[int, int]]) -> bytes:
    """``data`` with byte ``pos % len(data)`` set to ``value`` for each (pos, value):
    a serialized message or frame corrupted in place (same length)."""
    out = bytearray(data)
    for pos, value in writes:
        if out:
            out[pos % len(out)] = value
    return bytes(out)
