"""Headroom: the CPU the default fabric's switches and agents use with every NIC at line
rate, as a fraction of the machine's cores (``fabric_cpu_frac_at_line_rate``, goal <=
0.5: the other half absorbs the moments when many switches are due at once).

Measured by `bench.cpu.job_cpu` from /proc over a window inside a ring AllReduce over
every NIC (rail order, orthogonal ports: every link busy, none shared), scaled by the
share of line rate (in emulated time) the hosts really sent (``fabric_load``), so that
a run on a machine that other work shares still compares: the fabric at its dilation
(``fabric_dilation``, `topo.dilation`), every NIC at line rate. Wake-ups (voluntary
context switches of the processes' loops) are beside it: unlike CPU time, other load
on the machine does not move them. The same job again with the native NIC's agents
(tccl/nic) on the same fabric: the ``*_native_agents`` figures, side by side.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bench.cpu import job_cpu, line_rate_job
from bench.port_modes import DEFAULT_FABRIC, own_spec


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_headroom needs root (Mininet)")
    from controller.routes import program_fabric
    from topo.net import Fabric
    from topo.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="bench-headroom-") as tmp:
        spec_file = Path(tmp) / "fabric.yaml"
        spec_file.write_text(own_spec(DEFAULT_FABRIC))
        with Fabric(load_spec(spec_file), run_dir=Path(tmp) / "run", program=program_fabric) as fabric:
            use = job_cpu(fabric, line_rate_job(spec_file), Path(tmp) / "job", nic="python")
            native = job_cpu(fabric, line_rate_job(spec_file), Path(tmp) / "job-native", nic="native")
            dilation = fabric.clock.dilation
    return {"fabric_cpu_frac_at_line_rate": use.fabric_frac_at_line_rate,
            "fabric_cpu_frac": use.fabric_frac, "fabric_load": use.load,
            "agents_cpu_per_s_at_line_rate": use.agents_at_line_rate,
            "switches_cpu_per_s_at_line_rate": use.switches_at_line_rate,
            "switches_wakeups_per_s_at_line_rate": use.switches_wakeups_at_line_rate,
            "agents_wakeups_per_s_at_line_rate": use.agents_wakeups_at_line_rate,
            "fabric_dilation": dilation,
            "fabric_cpu_frac_at_line_rate_native_agents": native.fabric_frac_at_line_rate,
            "fabric_load_native_agents": native.load,
            "agents_cpu_per_s_at_line_rate_native": native.agents_at_line_rate,
            "agents_wakeups_per_s_at_line_rate_native": native.agents_wakeups_at_line_rate}
