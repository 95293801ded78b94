"""A 3-to-1 incast on a real fabric in Mininet (root): p4sim switches, TCCL agents.

One leaf, four servers, a queue of 8 packets (less than the three senders' windows).
Without PFC the leaf's port to the receiver tail-drops and go-back-N resends; with PFC
(switched on over QueueControl, the spec's thresholds) the leaf pauses the senders'
NICs, which honour it: no drop, no resend, and the PAUSE frames are in the leaf's
captures, decoded by Scapy's MACControl layers. The fabric is always torn down.
"""

from __future__ import annotations

import os
import shutil

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from scapy.contrib.mac_control import MACControlClassBasedFlowControl  # noqa: E402
from scapy.utils import rdpcap  # noqa: E402

from controller.routes import program_fabric  # noqa: E402
from experiments.incast import incast_job, incast_run, incast_spec, queue_clients  # noqa: E402
from experiments.runner import write_spec  # noqa: E402
from p4sim.switch.pause import MAX_QUANTA  # noqa: E402
from topo.addressing import AddressPlan  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import parse_spec  # noqa: E402

SIZE = 256 * 1024


def test_three_to_one_incast_loses_nothing_with_pfc_and_drops_without(tmp_path):
    spec = incast_spec(parse_spec({"blocks": 1, "servers_per_block": 4, "rails": 1, "spines": 1,
                                   "pcap": True, "dilation": "auto"}), f"p{os.getpid() % 1000}")
    assert spec.queue_depth == 8
    job = incast_job(write_spec(spec, tmp_path / "fabric.yaml"), size=SIZE, iters=1)
    assert len(job.workload.pairs) == 3
    with Fabric(spec, run_dir=tmp_path / "run", program=program_fabric) as fab:
        clients, channels = queue_clients(fab)
        try:
            off = incast_run(fab, clients, job, tmp_path / "off", pfc=False)
            on = incast_run(fab, clients, job, tmp_path / "on", pfc=True)
        finally:
            for channel in channels:
                channel.close()
        pcap_dir = fab.pcap_dir
    assert off["wrong"] == 0 and on["wrong"] == 0
    assert off["drops"] > 0 and off["resends"] > 0 and off["pauses"] == 0, off
    assert on["drops"] == 0 and on["resends"] == 0 and on["headroom_drops"] == 0, on
    assert on["pauses"] > 0 and on["nic_pauses"] > 0 and on["paused_s"] > 0 and on["storms"] == 0, on
    # On the wire: the leaf's PAUSE frames to a sender, XOFF and resume on priority 3.
    plan = AddressPlan(spec)
    sender = plan.server_at(0, 1).nics[0]
    frames = [p[MACControlClassBasedFlowControl]
              for p in rdpcap(str(pcap_dir / f"{plan.intf(sender.leaf, sender.leaf_port)}_out.pcap"))
              if MACControlClassBasedFlowControl in p]
    assert frames and all(f.c3_enabled and not f.c0_enabled for f in frames)
    assert {f.c3_pause_time for f in frames} == {MAX_QUANTA, 0}
