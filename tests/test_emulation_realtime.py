"""Real-time scheduling (emulation/realtime.py): an agent enters SCHED_RR itself once set
up, with every thread it has, instead of being started under ``chrt``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from emulation.clock import EmulationClock
from emulation.realtime import setup_niceness
from tccl.launch import agent_command

ROOT = Path(__file__).resolve().parent.parent

# A process with a second thread (started before, as an agent's NIC and control threads
# are) and a third (started after): each thread's policy and priority.
CHILD = """
import json, os, sys, threading
from emulation.realtime import enter_realtime

def policies():
    return sorted((os.sched_getscheduler(int(t)), os.sched_getparam(int(t)).sched_priority)
                  for t in os.listdir("/proc/self/task"))

if len(sys.argv) > 2:   # as a user without CAP_SYS_NICE (root drops to nobody first)
    if os.geteuid() == 0:
        os.setuid(65534)
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()
before = policies()
enter_realtime(int(sys.argv[1]))
threading.Thread(target=stop.wait, daemon=True).start()
print(json.dumps({"before": before, "after": policies()}))
"""


def _child(priority: int) -> dict[str, list[list[int]]]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(priority)], cwd=ROOT, capture_output=True,
                         text=True, timeout=30, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")
def test_every_thread_enters_sched_rr_and_later_threads_inherit_it():
    seen = _child(7)
    assert seen["before"] == [[os.SCHED_OTHER, 0]] * 2
    assert seen["after"] == [[os.SCHED_RR, 7]] * 3


def test_priority_zero_leaves_normal_scheduling():
    seen = _child(0)
    assert seen["before"] == [[os.SCHED_OTHER, 0]] * 2
    assert seen["after"] == [[os.SCHED_OTHER, 0]] * 3


def test_a_refused_priority_names_it_and_what_to_do():
    out = subprocess.run([sys.executable, "-c", CHILD, "7", "unprivileged"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode != 0
    assert "SCHED_RR priority 7 refused" in out.stderr and "rt_priority: 0" in out.stderr


def test_an_agent_sets_up_niced_and_is_told_its_real_time_priority():
    """Not under chrt (its imports and job set-up would take the CPU from running agents
    at their own priority) but at niceness -10 (ahead of normal work); the agent gets the
    priority one below the switches'. Without real-time scheduling, neither."""
    fabric = SimpleNamespace(spec=SimpleNamespace(rt_priority=10, nic="native"), clock=None)
    cmd = agent_command(fabric, Path("job.yaml"), "b0h0", Path("run"), EmulationClock.start(2.0))
    assert cmd[:4] == ["nice", "-n", "-10", sys.executable] and "chrt" not in cmd
    assert cmd[cmd.index("--rt-priority") + 1] == "9"
    assert setup_niceness(9) == -10         # what the spawner gives a forked agent
    fabric.spec.rt_priority = 0
    assert setup_niceness(0) == 0
    cmd = agent_command(fabric, Path("job.yaml"), "b0h0", Path("run"), EmulationClock.start(2.0))
    assert cmd[0] == sys.executable and cmd[cmd.index("--rt-priority") + 1] == "0"
