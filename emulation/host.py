"""The machine's CPU time taken by its hypervisor (``steal``), beside a run's fidelity.

On a virtual machine the host can hold a vCPU off its physical core while the guest has
work for it -- for milliseconds when other guests are busy. A switch or an agent at
real-time priority then wakes late however idle its own machine looks, and a run is
unfaithful for reasons no dilation or engine of ours chose. The kernel counts that time
per CPU as *steal* (/proc/stat); the switches put the machine's cumulative counts in
their fidelity snapshots (`p4sim.switch.device.Device.fidelity`) and a window's verdict
shows the share stolen during it (`emulation.fidelity.Fidelity.steal`). Measured on a
2-vCPU virtual machine (docs/fabric.md): at 8 % steal or less 77 of 78 runs were
faithful at dilations 1-1.5, at 10 % or more 39 of 45 were not. On bare metal it is 0.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Mapping

# The steal share from which a window's lateness is more likely the host's than the
# fabric's: at 10 % or more 39 of 45 measured runs were unfaithful, at 8 % or less 1 of 78.
NOISY_STEAL = 0.10

# Before a stolen run is measured again (tests/testkit.py): the host counts as quiet once
# it stole less than QUIET_STEAL over the last QUIET_S. Steal came in bursts of 30-60 s
# beside suite runs here (5-second samples, 2026-12-07), and a second measurement taken
# as one burst faded was stolen from too (a fresh-clone CI run: 20-33 % during the first
# run of the three-tier ring, 9.9 % during its second, both unfaithful); so wait for a
# quiet spell, at most QUIET_WAIT_S.
QUIET_STEAL = NOISY_STEAL / 2
QUIET_S = 10.0
QUIET_WAIT_S = 45.0

# /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal guest guest_nice.
# Guest time is already counted in user and nice, so the total stops at steal.
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks(stat: str = "/proc/stat") -> dict[str, int]:
    """The machine's cumulative CPU time over all its CPUs, in clock ticks: ``steal``
    and ``total`` (every state the CPUs can be in, steal included); zeros where the
    kernel does not say (a /proc without the line)."""
    try:
        with open(stat, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return {"steal": 0, "total": 0}
    if not fields or fields[0] != "cpu":
        return {"steal": 0, "total": 0}
    values = [int(v) for v in fields[1:1 + len(_FIELDS)]]
    values += [0] * (len(_FIELDS) - len(values))
    return {"steal": values[_FIELDS.index("steal")], "total": sum(values)}


def steal_share(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """The share of the machine's CPU time stolen between two `cpu_ticks` readings;
    None when no time passed between them (or either is missing its counts)."""
    try:
        total = float(after["total"]) - float(before["total"])
        steal = float(after["steal"]) - float(before["steal"])
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, steal) / total if total > 0 else None


def wait_for_quiet_host(quiet_s: float = QUIET_S, limit_s: float = QUIET_WAIT_S, below: float = QUIET_STEAL,
                        *, step_s: float = 1.0, ticks: Callable[[], Mapping[str, int]] = cpu_ticks,
                        clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> float | None:
    """Block until the hypervisor stole less than ``below`` of the machine over the last
    ``quiet_s`` seconds, or ``limit_s`` have passed; return the share over the last
    window read (None at once where the kernel counts no CPU time: nothing to wait for)."""
    start = clock()
    readings = deque([(start, ticks())])
    if not readings[0][1]["total"]:
        return None
    while True:
        sleep(step_s)
        now = clock()
        readings.append((now, ticks()))
        # The window starts at the newest reading at least quiet_s old.
        while len(readings) > 2 and now - readings[1][0] >= quiet_s:
            readings.popleft()
        share = steal_share(readings[0][1], readings[-1][1])
        if now - readings[0][0] >= quiet_s and share is not None and share < below:
            return share
        if now - start >= limit_s:
            return share
