"""The agents' CPU per emulated bit, Python transport against the native NIC (tccl/nic),
side by side in one run: two agents joined by veth pairs, every NIC streaming to its
peer at line rate in both directions (as in a ring), nothing else in the way
(`bench.cpu.agent_pair_cpu`). ``nic_cpu_ratio`` is native over Python: the share of
the agents' CPU the native NIC leaves. Needs root (network namespaces)."""

from __future__ import annotations

import os

from bench.cpu import agent_pair_cpu
from topo.spec import NICS

# Two rails, both directions: four NICs sending. 40 Mbit/s at MTU 4096 (the fabric's)
# is what the Python agents still carry on the project's 2-core machine.
RAILS, LINE_MBPS, MTU = 2, 40.0, 4096
SIZE = 48 << 20             # per NIC: ~10 s at line rate, well past the window


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_nic needs root (network namespaces)")
    figures: dict[str, float] = {}
    for nic in NICS:
        use = agent_pair_cpu(rails=RAILS, duplex=True, size=SIZE, line_mbps=LINE_MBPS, mtu=MTU, nic=nic)
        figures.update({f"nic_{nic}_cpu_ns_per_bit": use["agent_pair_cpu_ns_per_bit"],
                        f"nic_{nic}_cpu_us_per_frame": use["agent_pair_cpu_us_per_frame"],
                        f"nic_{nic}_load": use["agent_pair_load"],
                        f"nic_{nic}_wakeups_per_frame": use["agent_pair_wakeups_per_frame"]})
    figures["nic_cpu_ratio"] = figures["nic_native_cpu_ns_per_bit"] / figures["nic_python_cpu_ns_per_bit"]
    return figures
