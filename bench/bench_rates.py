"""The default fabric's shape at several link rates (issue 23: the highest rate this
machine carries faithfully at dilation <= 1.5): for each rate R in SWEEP_MBPS, the spec
restated for R (`topo.spec.at_link_rate`: time_factor x rate kept, ECN/PFC in frames),
the dilation `dilation: auto` gives it here (``fabric_<R>mbps_dilation_auto``), and the
fabric run at that dilation with every NIC at line rate (`bench.cpu.line_rate_job`,
native agents): CPU per wall second as a fraction of the machine
(``fabric_<R>mbps_cpu_frac_at_line_rate``, which `auto` aims to keep under
`topo.dilation.CPU_BUDGET`) and the share of the line rate, in emulated time, the hosts
reached (``fabric_<R>mbps_line_rate_share``: below ~0.95 the fabric cannot keep up).

Whether the demo is faithful at a rate is the demo's verdict, not this bench's
(docs/fabric.md gives both). Needs root (Mininet); a run per rate, ~20-40 s each.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import yaml

from bench.cpu import job_cpu, line_rate_job
from bench.port_modes import own_spec
from topo.dilation import dilation_for
from topo.spec import at_link_rate, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "topo" / "fabrics" / "default.yaml"
# Link rates swept, Mbit/s: the old default, twice it, and up to the aim.
SWEEP_MBPS = (10, 20, 50, 100)
# Iterations of the line-rate job at dilation 1 (~9 emulated s); fewer when the fabric
# is dilated, so that a slow rate's job still outlasts job_cpu's window and no more.
ITERS_AT_DILATION_1 = 6


def at_rate(mbps: float) -> dict[str, float]:
    """The default shape at ``mbps``, at the dilation `auto` gives it here (module
    docstring)."""
    from controller.routes import program_fabric
    from topo.net import Fabric

    data = at_link_rate(yaml.safe_load(own_spec(DEFAULT)), mbps, str(DEFAULT))
    data.pop("dilation", None)
    dilation = dilation_for(parse_spec(data, str(DEFAULT)))
    name = f"fabric_{mbps:g}mbps"
    with tempfile.TemporaryDirectory(prefix="bench-rates-") as tmp:
        spec_file = Path(tmp) / "fabric.yaml"
        spec_file.write_text(yaml.safe_dump({**data, "dilation": dilation}))
        iters = max(2, math.ceil(ITERS_AT_DILATION_1 / dilation))
        with Fabric(load_spec(spec_file), run_dir=Path(tmp) / "run", program=program_fabric) as fabric:
            use = job_cpu(fabric, line_rate_job(spec_file, iters=iters), Path(tmp) / "job", nic="native")
    return {f"{name}_dilation_auto": dilation, f"{name}_cpu_frac_at_line_rate": use.fabric_frac_at_line_rate,
            f"{name}_line_rate_share": use.load}


def run() -> dict[str, float]:
    if os.geteuid() != 0:
        raise RuntimeError("bench_rates needs root (Mininet)")
    figures: dict[str, float] = {}
    for mbps in SWEEP_MBPS:
        figures.update(at_rate(mbps))
    return figures
