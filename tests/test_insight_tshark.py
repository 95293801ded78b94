"""The switches' captures as Wireshark reads them (root, Mininet, Debian's tshark).

A short TCCL AllReduce across the spines of a small fabric whose uplinks are half the
NICs' rate and whose ECN thresholds are low, so that the capture holds the three kinds
of RoCEv2 frame: data, ACKs and CNPs. tshark (Wireshark's dissectors, which take UDP
port 4791 as RoCEv2) must decode every frame to port 4791 as an InfiniBand BTH, and
each QP's data frames, as they enter the fabric, must carry the destination QPN and
the PSNs its agent's results imply (PSN 0 up, one per packet it reports), its ACKs
the QP's own number; the CNPs reaching a sender are the ones its agent counted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

from controller.routes import program_fabric  # noqa: E402
from tccl.job import Transport, Workload, job_from_fabric, qpn  # noqa: E402
from tccl.launch import run_on_fabric  # noqa: E402
from topo.addressing import AddressPlan  # noqa: E402
from topo.freeports import free_port_base  # noqa: E402
from topo.headers import ACKNOWLEDGE, CNP  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import parse_spec, replace  # noqa: E402

FIELDS = ("frame.protocols", "ip.src", "ip.dst", "udp.srcport", "udp.dstport", "ip.dsfield.ecn",
          "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn")
DATA_OPCODES = {0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0A}


def tshark(pcap: Path, display_filter: str = "udp.port == 4791") -> list[dict[str, str]]:
    """Every frame of ``pcap`` matching the filter, as tshark decodes it: FIELDS by name."""
    done = subprocess.run(["tshark", "-n", "-r", str(pcap), "-Y", display_filter, "-T", "fields",
                           "-E", "separator=;", *sum((["-e", f] for f in FIELDS), [])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [dict(zip(FIELDS, line.split(";"))) for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> tuple[Path, AddressPlan, dict[str, dict]]:
    """(capture directory, plan, the agents' results) of one short job; the fabric is
    stopped (its captures complete) before the test reads them."""
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make setup installs it)")
    tmp = tmp_path_factory.mktemp("tshark")
    spec = parse_spec({"name": "tshark", "blocks": 2, "servers_per_block": 1, "rails": 1, "spines": 2,
                       "sample_rate": 0, "pcap": True, "links": {"host_mbps": 10, "uplink_mbps": 5},
                       "ecn": {"kmin": 1, "kmax": 3, "pmax": 1.0}})
    spec = replace(spec, node_prefix=f"k{os.getpid() % 1000}", grpc_port_base=free_port_base(spec.switches))
    spec_path = tmp / "fabric.yaml"
    spec_path.write_text(
        "name: tshark\nblocks: 2\nservers_per_block: 1\nrails: 1\nspines: 2\nsample_rate: 0\n"
        "links: {host_mbps: 10, uplink_mbps: 5}\necn: {kmin: 1, kmax: 3, pmax: 1.0}\n"
        f"node_prefix: {spec.node_prefix}\ngrpc_port_base: {spec.grpc_port_base}\n")
    with Fabric(spec, run_dir=tmp / "run", program=program_fabric) as fabric:
        job = job_from_fabric(spec_path, Workload(op="allreduce", sizes=(256 * 1024,), iters=1, warmup=0),
                              Transport(seed=3, ports="random"), name="tshark-allreduce")
        results = run_on_fabric(fabric, job, tmp / "run" / "tccl", timeout=60)
        plan = fabric.plan
    return tmp / "run" / "pcap", plan, results


def test_every_roce_frame_decodes_as_infiniband_bth(captured) -> None:
    pcaps, _, _ = captured
    files = sorted(pcaps.glob("*.pcap"))
    assert files
    kinds: Counter = Counter()
    for pcap in files:
        for frame in tshark(pcap):
            assert "udp:infiniband" in frame["frame.protocols"], (pcap.name, frame)
            assert frame["infiniband.bth.destqp"].startswith("0x"), (pcap.name, frame)
            opcode = int(frame["infiniband.bth.opcode"])
            kinds["data" if opcode in DATA_OPCODES else "ack" if opcode == ACKNOWLEDGE
                  else "cnp" if opcode == CNP else f"opcode {opcode}"] += 1
            if opcode in DATA_OPCODES and frame["ip.dsfield.ecn"] == "3":
                kinds["ce"] += 1            # marked by a switch: what the CNPs answer
    assert set(kinds) >= {"data", "ack", "cnp", "ce"}, kinds
    assert not [k for k in kinds if k.startswith("opcode")], kinds


def test_qpns_and_psns_are_the_agents(captured) -> None:
    pcaps, plan, results = captured
    nics = {nic.ip: nic for nic in plan.nics()}
    flows = [f for r in results.values() for f in r["flows"] if f["packets"]]
    assert len(flows) >= 2
    cnps_seen = 0
    for f in flows:
        src, dst = nics[f["src_ip"]], nics[f["dst_ip"]]
        wire_qpn = qpn(f["peer_rank"], f["local_rank"], f["qp_index"])     # the receiver's QP
        entering = tshark(pcaps / f"{plan.intf(src.leaf, src.leaf_port)}_in.pcap",
                          f"ip.src == {src.ip} && ip.dst == {dst.ip} && infiniband.bth.destqp == {wire_qpn}")
        data = [fr for fr in entering if int(fr["infiniband.bth.opcode"]) in DATA_OPCODES]
        assert len(data) == f["packets"], f
        assert {int(fr["udp.srcport"]) for fr in data} == {f["sport"]}
        psns = [int(fr["infiniband.bth.psn"]) for fr in data]
        assert sorted(set(psns)) == list(range(f["packets"] - f["retransmits"])), (f, psns[:20])
        if not f["retransmits"]:
            assert psns == sorted(psns)
        # The receiver's ACKs enter the fabric at its leaf, to this QP's number.
        acks = tshark(pcaps / f"{plan.intf(dst.leaf, dst.leaf_port)}_in.pcap",
                      f"infiniband.bth.opcode == {ACKNOWLEDGE} && infiniband.bth.destqp == {f['qpn']}")
        assert acks and all(fr["ip.src"] == dst.ip for fr in acks), f
        # The CNPs delivered to the sender are the ones its agent counted.
        cnps = tshark(pcaps / f"{plan.intf(src.leaf, src.leaf_port)}_out.pcap",
                      f"infiniband.bth.opcode == {CNP} && infiniband.bth.destqp == {f['qpn']}")
        assert len(cnps) == f["cnps"], (f, len(cnps))
        cnps_seen += len(cnps)
    assert cnps_seen > 0
