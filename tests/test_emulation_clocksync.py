"""Measuring another machine's CLOCK_MONOTONIC offset (emulation/clocksync.py)."""

from __future__ import annotations

import subprocess
import sys

from emulation import clocksync
from emulation.clock import EmulationClock


def test_offset_from_the_shortest_round_trip():
    # Our clock and a scripted other machine 5 s ahead whose answers come back after
    # varying delays; it reads its clock 10 ns after the question leaves (not half way),
    # so only the shortest round trip gives the offset to within 20 ns.
    delays = iter([900, 40, 300, 2000])       # ns of each round trip
    t = [1_000_000]
    offset = 5_000_000_000

    def now() -> int:
        return t[0]

    def ask() -> int:
        rtt = next(delays)
        theirs = t[0] + 10 + offset
        t[0] += rtt
        return theirs

    got = clocksync.measure(ask, rounds=4, now=now)
    assert got.error_ns == 20                 # half the 40 ns round trip
    assert abs(got.ns - offset) <= got.error_ns


def test_probe_answers_with_this_machines_clock():
    probe = subprocess.Popen([sys.executable, "-u", "-c", clocksync.PROBE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)

    def ask() -> int:
        probe.stdin.write("\n")
        probe.stdin.flush()
        return int(probe.stdout.readline())

    try:
        got = clocksync.measure(ask)
    finally:
        probe.stdin.close()
        probe.wait(10)
    assert abs(got.ns) <= got.error_ns        # the same machine: offset 0


def test_shifted_clock_reads_the_same_emulated_time_on_the_other_machine():
    clock = EmulationClock(origin_ns=10_000_000_000, dilation=4.0)
    other = clock.shifted(3_000_000_000)      # its CLOCK_MONOTONIC reads 3 s more
    assert other.dilation == clock.dilation
    for ours in (10_000_000_000, 12_345_678_901):
        assert other.from_monotonic_ns(ours + 3_000_000_000) == clock.from_monotonic_ns(ours)
