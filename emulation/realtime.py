"""Real-time scheduling of the emulated network's processes (spec key ``rt_priority``).

Switches and agents run under SCHED_RR, as Mininet-HiFi runs its hosts: the emulated
network then gets a core before anything else on the machine, so a compile or a test
beside it cannot make its packets late (emulation/fidelity.py measures that it does
not). Controllers and recorders stay at normal priority: they observe the network and
must never starve it. Agents run one priority below the switches: when a switch and an
agent are due at once, the switch -- the modelled hardware, whose departures the
fidelity bounds judge -- goes first; an agent late by a frame only sends later. The kernel's RT throttling (sched_rt_runtime_us, 95 % by default)
keeps the machine usable even if a real-time process spins.

An agent sets up at niceness -10 (`setup_prefix`) and enters SCHED_RR itself
(`enter_realtime`) once it has imported its libraries and built its job, before its
traffic: started under ``chrt`` its second or so of imports ran at the running agents'
own priority, and a job starting beside another (a second tenant, the fluid-model
check's second flow) held both cores from the first job's NICs (their handling p99 4-8
packet times at dilation 2). Niceness -10 still puts the set-up ahead of normal work on
the machine (a test run beside it) and behind every real-time thread.
"""

from __future__ import annotations

import gc
import os


def realtime_prefix(priority: int) -> list[str]:
    """``chrt -r PRIORITY`` (SCHED_RR, inherited by every thread of the process) to put
    before a command; empty for priority 0 (normal scheduling)."""
    return ["chrt", "-r", str(priority)] if priority else []


def agent_priority(switch_priority: int) -> int:
    """The agents' SCHED_RR priority beside switches at ``switch_priority`` (0: normal)."""
    return max(1, switch_priority - 1) if switch_priority else 0


# Niceness of an agent's set-up (before `enter_realtime`): CFS gives it ~9x the CPU share
# of a process at 0.
SETUP_NICE = -10


def setup_niceness(priority: int) -> int:
    """The niceness increment of an agent's set-up when it enters SCHED_RR at
    ``priority`` once set up: SETUP_NICE; 0 for priority 0 (normal scheduling throughout)."""
    return SETUP_NICE if priority else 0


def setup_prefix(priority: int) -> list[str]:
    """``nice -n -10`` (`setup_niceness`) to put before the command of an agent started
    by exec; empty for priority 0."""
    nice = setup_niceness(priority)
    return ["nice", "-n", str(nice)] if nice else []


def enter_realtime(priority: int) -> None:
    """Every thread of this process to SCHED_RR at ``priority`` (0: left as they are);
    threads started afterwards inherit it from the thread that starts them. Raises
    PermissionError, naming the priority, where the process may not (not root)."""
    if not priority:
        return
    param = os.sched_param(priority)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_RR, param)
        except ProcessLookupError:   # a thread that ended meanwhile
            continue
        except PermissionError as e:
            raise PermissionError(f"SCHED_RR priority {priority} refused ({e.strerror}): real-time "
                                  f"scheduling needs root, or rt_priority: 0 in the fabric spec") from e


def settle_heap() -> None:
    """Collect once, then exempt every object that exists from later collections
    (`gc.freeze`): call it when a process has set up and before its packets flow.

    A full collection walks every object of the process: in an agent that has imported
    its libraries and built its job (~70 000 objects) one took 30-45 ms, at the start
    of the job's traffic -- several packet times at 10 Mbit/s, with the NICs' frames
    waiting. Afterwards the collector walks only what the run itself allocates."""
    gc.collect()
    gc.freeze()
