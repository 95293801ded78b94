"""GOR's detect -> moved loop time on the default fabric: two elephant flows forced onto
one uplink, GOR moves one (the scenario: `experiments.gor_loop`). Needs root.

The default fabric is cut down to the one rail the scenario uses, GOR runs at its
default settings, five runs, everything torn down after.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from controller.gor import Gor
from experiments.gor_loop import SENDER_MBPS, measure_loop
from tccl.trace import link_scale
from topo.freeports import free_port_base
from topo.spec import load_spec, replace

DEFAULT_FABRIC = Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"
# 1 in 16 instead of the default 64: the moved flow shows up in a sample within one
# telemetry interval, so the figure measures GOR rather than the sampling rate.
BENCH_SAMPLE_RATE = 16


def run(repeats: int = 5) -> dict[str, float]:
    from topo.net import Fabric   # Mininet is imported only when a fabric is built

    spec = load_spec(DEFAULT_FABRIC)
    spec = replace(spec, rails=1, sample_rate=BENCH_SAMPLE_RATE, node_prefix="gb",
                   grpc_port_base=free_port_base(spec.blocks + spec.spines))
    with tempfile.TemporaryDirectory(prefix="gor-bench-") as tmp:
        with Fabric(spec, run_dir=Path(tmp) / "fabric") as fabric:
            assert fabric.pipeline is not None
            with Gor(fabric.plan, fabric.pipeline, Path(tmp) / "gor", fabric=fabric) as gor:
                return measure_loop(gor, repeats, sender_mbps=SENDER_MBPS * link_scale(spec.links.host_mbps))
