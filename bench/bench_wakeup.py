"""How late this machine wakes a real-time thread: the bound under every fidelity
verdict (docs/fabric.md).

The switches' and the NICs' loops sleep until their next departure is due; a link is
faithful while its frames leave within a packet time of schedule (emulation/fidelity.py).
On a virtual machine the host can hold a vCPU for milliseconds (emulation/host.py), so a
link whose packet time is below the wake-up tail cannot be faithful however much CPU the
engines leave free. The probe (`bench/wakeup.c`) sleeps to absolute deadlines every
PERIOD_US for SECONDS at the switches' SCHED_RR priority, on the otherwise idle machine,
and reports its lateness; ``host_wakeup_fastest_faithful_mbps`` is the link rate whose
MTU frame takes as long as the p99.9 (a frame time at 10 Mbit/s: 3.3 ms).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.cbuild import compiled
from emulation.host import cpu_ticks, steal_share
from emulation.realtime import realtime_prefix
from topo.headers import ROCE_DATA_OVERHEAD
from topo.spec import FabricSpec

SECONDS = 10.0
PERIOD_US = 500.0        # a tenth of a 10 Mbit/s frame time, wake-ups as often as the loops'
PRIORITY = FabricSpec.rt_priority


def probe(seconds: float = SECONDS, period_us: float = PERIOD_US, priority: int = 0) -> dict[str, float]:
    """The probe's lateness quantiles (us) over ``seconds`` at SCHED_RR ``priority`` (0:
    as this process is scheduled), and the host's steal meanwhile."""
    before = cpu_ticks()
    done = subprocess.run([*realtime_prefix(priority), str(compiled(Path(__file__).with_name("wakeup.c"))),
                           f"{seconds:g}", f"{period_us:g}"], capture_output=True, text=True, check=True,
                          timeout=seconds * 3 + 30)
    count, p50, p99, p999, worst = (int(v) for v in done.stdout.split())
    steal = steal_share(before, cpu_ticks())
    return {"count": count, "p50_us": p50 / 1e3, "p99_us": p99 / 1e3, "p999_us": p999 / 1e3,
            "max_us": worst / 1e3, "steal": steal if steal is not None else 0.0}


def run() -> dict[str, float]:
    priority = PRIORITY if os.geteuid() == 0 else 0
    got = probe(priority=priority)
    frame_bits = (FabricSpec.mtu + ROCE_DATA_OVERHEAD) * 8      # the default fabric's MTU frame
    print(f"wake-ups every {PERIOD_US:g} us for {SECONDS:g} s at SCHED_RR {priority}: late p50 {got['p50_us']:.0f} us, "
          f"p99 {got['p99_us']:.0f}, p99.9 {got['p999_us']:.0f}, max {got['max_us']:.0f}; "
          f"host steal {100 * got['steal']:.0f} %", file=sys.stderr)
    return {"host_wakeup_p50_us": got["p50_us"], "host_wakeup_p99_us": got["p99_us"],
            "host_wakeup_p999_us": got["p999_us"], "host_wakeup_max_us": got["max_us"],
            "host_wakeup_fastest_faithful_mbps": frame_bits / got["p999_us"] if got["p999_us"] > 0 else float("inf")}
