"""Real-time scheduling of the emulated network's processes (spec key ``rt_priority``).

Switches and agents run under SCHED_RR, as Mininet-HiFi runs its hosts: the emulated
network then gets a core before anything else on the machine, so a compile or a test
beside it cannot make its packets late (emulation/fidelity.py measures that it does
not). Controllers and recorders stay at normal priority: they observe the network and
must never starve it. The kernel's RT throttling (sched_rt_runtime_us, 95 % by default)
keeps the machine usable even if a real-time process spins.
"""

from __future__ import annotations


def realtime_prefix(priority: int) -> list[str]:
    """``chrt -r PRIORITY`` (SCHED_RR, inherited by every thread of the process) to put
    before a command; empty for priority 0 (normal scheduling)."""
    return ["chrt", "-r", str(priority)] if priority else []
