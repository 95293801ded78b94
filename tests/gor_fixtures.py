"""The small fabric the GOR integration tests run on, and a GOR on it (root, Mininet).

2 blocks x 2 servers x 1 rail, 2 spines, NICs and uplinks at 10 Mbit/s: two 6 Mbit/s
flows overload an uplink, one does not. Sampling 1-in-4: at RoCE MTU 4096 a flow sends
a quarter of the frames it sent at MTU 1024, so this keeps the samples per second GOR
verifies a move from (was 1-in-16). Node names carry ``letter`` and this process's id, so
parallel runs do not collide; everything is stopped when the block ends, by PID.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from controller.config import default_config
from controller.gor import Gor
from topo.freeports import free_port_base
from topo.net import Fabric
from topo.spec import FabricSpec, LinkRates

UPLINK_MBPS = 10.0     # one 6 Mbit/s flow fits (60 % < 75 % safety), two do not


@contextmanager
def small_fabric(name: str, letter: str, run_dir: Path) -> Iterator[Fabric]:
    """The fabric, started in ``run_dir``."""
    spec = FabricSpec(blocks=2, servers_per_block=2, rails=1, spines=2, name=name,
                      links=LinkRates(host_mbps=10, uplink_mbps=UPLINK_MBPS), sample_rate=4,
                      node_prefix=f"{letter}{os.getpid() % 1000}", grpc_port_base=free_port_base(4))
    fab = Fabric(spec, run_dir=run_dir)
    try:
        fab.start()
        yield fab
    finally:
        fab.stop()


@contextmanager
def gor_on(fabric: Fabric, run_dir: Path) -> Iterator[Gor]:
    """GOR with the default thresholds on ``fabric``, its run directory ``run_dir``."""
    assert fabric.pipeline is not None
    g = Gor(fabric.plan, fabric.pipeline, run_dir, default_config(fabric.plan),
            fabric=fabric)
    try:
        g.start()
        yield g
    finally:
        g.stop()
