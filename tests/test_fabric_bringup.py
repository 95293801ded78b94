"""The default fabric in Mininet (root): p4sim switch processes, programmed over
P4Runtime by controller.routes, hosts configured by topo.net.

One fabric is brought up for the module (a few seconds) and always torn down. Its
spec is the default one with a node prefix and gRPC ports of its own (so a `make run`
on the same machine is not disturbed), captures on, a sampling rate of 4 and slower
uplinks, so that two paced senders oversubscribe a leaf uplink without the switches'
CPU being the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mnexec") is None,
                                reason="needs root and Mininet")

import finsy as fy  # noqa: E402
import grpc  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from scapy.utils import rdpcap  # noqa: E402

from controller.routes import program_fabric  # noqa: E402
from p4sim.runtime.queues import QueueControlClient  # noqa: E402
from topo.addressing import AddressPlan, Nic  # noqa: E402
from topo.freeports import free_port_base  # noqa: E402
from topo.hashmodel import FiveTuple, predict_path, source_port_for_spine  # noqa: E402
from topo.namespaces import host_socket  # noqa: E402
from topo.net import Fabric  # noqa: E402
from topo.spec import EcnProfile, LinkRates, load_spec, replace  # noqa: E402

from testkit import wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UPLINK_MBPS = 5.0


@pytest.fixture(scope="module", params=["own", "shared"])
def fabric(request, tmp_path_factory) -> Iterator[Fabric]:
    """The fabric, once with a process per switch and once with every switch in one
    process on one packet loop (``switch_process: shared``, p4sim switches, the
    default), each switch with a member process of its own."""
    spec = load_spec(ROOT / "topo" / "fabrics" / "default.yaml")
    # ECN thresholds well above what a scheduling hiccup of the switch process can queue.
    spec = replace(spec, node_prefix=f"t{os.getpid() % 1000}", grpc_port_base=free_port_base(spec.switches),
                   pcap=True, sample_rate=4, links=LinkRates(host_mbps=20, uplink_mbps=UPLINK_MBPS),
                   ecn=EcnProfile(kmin=10, kmax=30, pmax=0.2),
                   # It checks forwarding, not fidelity: the dilation its frame rate had
                   # before the calibration was measured (auto would give it twice the
                   # default fabric's, for twice the frames).
                   dilation=2.0, switch_process=request.param)
    with Fabric(spec, run_dir=tmp_path_factory.mktemp("run"), program=program_fabric) as fab:
        yield fab


def frame(plan: AddressPlan, src: Nic, dst: Nic, sport: int, dport: int = 4791, size: int = 100,
          tos: int = 0, roce: bool = False) -> bytes:
    l4 = UDP(sport=sport, dport=dport)
    if roce:
        l4 = l4 / BTH(opcode=4, dqpn=0x11, psn=sport)
    pkt = Ether(src=src.mac, dst=plan.switch(src.leaf).mac) / IP(src=src.ip, dst=dst.ip, ttl=64, tos=tos) / l4
    return bytes(pkt / Raw(bytes(max(0, size - len(pkt)))))


def send(fab: Fabric, nic: Nic, frames: list[bytes]) -> None:
    with host_socket(fab.host(nic.server).pid, nic.intf) as sock:
        for data in frames:
            sock.send(data)


def captured(fab: Fabric, node: str, port: int, direction: str) -> list:
    path = fab.pcap_dir / f"{node}-eth{port}_{direction}.pcap"
    return list(rdpcap(str(path))) if path.exists() and path.stat().st_size > 24 else []


def udp_flows(packets: list) -> dict[tuple, object]:
    return {(p[IP].src, p[IP].dst, p[UDP].sport, p[UDP].dport): p for p in packets if UDP in p}


def test_switch_processes_follow_the_spec(fabric: Fabric) -> None:
    """A process per switch with a packet loop thread each, or a member process per
    switch (no loop of its own) and one shared process for all with one packet loop
    thread."""
    def loops(pid: int) -> int:
        return sum(1 for t in Path(f"/proc/{pid}/task").iterdir() if (t / "comm").read_text().strip() == "p4n-loop")

    own = {sw.process.pid for sw in fabric.net.switches}
    shared = {pid for sw in fabric.net.switches for pid in sw.pids()} - own
    assert len(own) == len(fabric.plan.switches)
    if fabric.spec.switch_process == "own":
        assert not shared and [loops(pid) for pid in own] == [1] * len(own)
    else:
        assert len(shared) == 1 and [loops(pid) for pid in shared] == [1]
        assert [loops(pid) for pid in own] == [0] * len(own)


def test_the_root_namespace_keeps_quiet_on_every_switch_port(fabric: Fabric) -> None:
    """No IPv6 on the switches' cables (autoconfiguration would put the root namespace's
    own frames on the fabric), nor on the hosts' NICs; every cable up and at the spec's
    MTU, every NIC with the plan's MAC (the cables are laid in batches: topo/cables.py)."""
    iff_up = 0x1
    for sw in fabric.net.switches:
        for iface in sw.data_ports().values():
            assert Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6").read_text().strip() == "1", iface
            assert Path(f"/sys/class/net/{iface}/mtu").read_text().strip() == str(fabric.spec.iface_mtu), iface
            assert int(Path(f"/sys/class/net/{iface}/flags").read_text(), 16) & iff_up, iface
    for server in fabric.plan.servers:
        out = fabric.host(server.name).cmd("cat /proc/sys/net/ipv6/conf/all/disable_ipv6")
        assert out.strip() == "1", server.name
        for nic in server.nics:
            mac, mtu, flags = fabric.host(server.name).cmd(
                f"cat /sys/class/net/{nic.intf}/address /sys/class/net/{nic.intf}/mtu "
                f"/sys/class/net/{nic.intf}/flags").split()
            assert (mac, int(mtu), int(flags, 16) & iff_up) == (nic.mac, fabric.spec.iface_mtu, iff_up), nic.intf


def test_every_nic_pings_every_other_nic(fabric: Fabric) -> None:
    """Same rail within a block and across blocks, and across rails (policy routing
    sends a NIC's traffic out of that NIC; the spines join the rails)."""
    plan = fabric.plan
    nics = list(plan.nics())
    failed = []
    for src in nics:
        targets = " ".join(n.ip for n in nics if n.server != src.server)
        out = fabric.host(src.server).cmd(
            f"for d in {targets}; do ping -n -q -c1 -W2 -I {src.ip} $d >/dev/null || echo FAIL $d; done")
        failed += [f"{src.ip} -> {line.split()[1]}" for line in out.splitlines() if line.startswith("FAIL")]
    assert not failed, failed


def test_udp_paths_equal_the_hash_model_for_200_flows(fabric: Fabric) -> None:
    """200 random 5-tuples, one packet each: the spine that saw each flow (from the
    spines' captures) is the one predicted; MACs and TTL are rewritten at every hop
    (checked as the spine receives it and as the last leaf delivers it)."""
    plan = fabric.plan
    nics = list(plan.nics())
    rng = random.Random(200)
    flows: list[tuple[Nic, Nic, FiveTuple]] = []
    while len(flows) < 200:
        src, dst = rng.sample(nics, 2)
        flow = FiveTuple(src.ip, dst.ip, 17, rng.randrange(1024, 65536), rng.choice([4791, rng.randrange(1, 65536)]))
        flows.append((src, dst, flow))
    by_src: dict[str, list[bytes]] = {}
    for src, dst, flow in flows:
        by_src.setdefault(src.ip, []).append(frame(plan, src, dst, flow.sport, flow.dport))
    for ip, frames in by_src.items():
        send(fabric, plan.nic(ip), frames)

    def delivered() -> dict:
        out = {}
        for nic in nics:
            out.update(udp_flows(captured(fabric, nic.leaf, nic.leaf_port, "out")))
        return out

    def all_delivered() -> dict | None:
        out = delivered()
        return out if len(out) >= len(flows) else None

    got = wait_for("every flow at its destination", all_delivered, 20, 0.2,
                   detail=lambda: f"{len(delivered())} of {len(flows)} flows delivered")
    spine_of, at_spine = {}, {}
    for spine in plan.spines:
        for leaf in plan.leaves:
            for key, pkt in udp_flows(captured(fabric, spine.name, plan.spine_port(leaf.block, leaf.rail), "in")).items():
                spine_of[key], at_spine[key] = spine.name, pkt
    for src, dst, flow in flows:
        key = (flow.src, flow.dst, flow.sport, flow.dport)
        assert key in got, f"flow {flow} not delivered"
        path = predict_path(plan, flow)
        assert spine_of.get(key) == (path[2] if len(path) == 5 else None), (flow, path)
        if key in at_spine:  # first hop: leaf MAC -> spine MAC, TTL 63
            hop = at_spine[key]
            assert (hop[Ether].src, hop[Ether].dst, hop[IP].ttl) == (
                plan.switch(src.leaf).mac, plan.switch(path[2]).mac, 63)
        pkt = got[key]
        assert pkt[Ether].dst == dst.mac and pkt[Ether].src == plan.switch(dst.leaf).mac
        assert pkt[IP].ttl == 64 - (len(path) - 2)
    assert len(set(spine_of.values())) == len(plan.spines)


def test_random_source_ports_collide_on_the_uplinks_like_k_factorial_over_k_to_the_k(fabric: Fabric) -> None:
    """What a stock library does, measured on the switches: per trial, the k flows that
    leave one leaf for the other block (k = spines) draw random source ports
    (`tccl.ports.random_ports`) and send one RoCE frame each; the spines' captures tell
    which uplink each took. The trials where every uplink carries one flow must come
    out at k!/k^k (within 4 sigma over 200 trials), each flow on the spine the hash
    model predicts."""
    from tccl.ports import random_ports

    plan = fabric.plan
    k = len(plan.spines)
    srcs = [plan.server_at(0, i % plan.spec.servers_per_block).nics[0] for i in range(k)]
    dsts = [plan.server_at(1, i % plan.spec.servers_per_block).nics[0] for i in range(k)]
    trials = [random_ports([(i, i) for i in range(k)], seed=f"fabric/{t}") for t in range(200)]
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(host_socket(fabric.host(src.server).pid, src.intf)) for src in srcs]
        for ports in trials:  # paced: a burst of all of them would overflow the uplink queues
            for i, sock in enumerate(socks):
                sock.send(frame(plan, srcs[i], dsts[i], ports[(i, i)], roce=True))
            time.sleep(0.002)
    wanted = {(srcs[i].ip, dsts[i].ip, ports[(i, i)], 4791) for ports in trials for i in range(k)}

    def spine_of() -> dict[tuple, str]:
        return {key: spine.name for spine in plan.spines
                for key in udp_flows(captured(fabric, spine.name, plan.spine_port(0, 0), "in"))}

    def all_at_spines() -> dict[tuple, str] | None:
        out = spine_of()
        return out if wanted <= out.keys() else None

    seen = wait_for("every flow at a spine", all_at_spines, 20, 0.2,
                    detail=lambda: f"{len(wanted - spine_of().keys())} flows never reached a spine")
    perfect = 0
    for ports in trials:
        used = set()
        for i in range(k):
            flow = FiveTuple(srcs[i].ip, dsts[i].ip, 17, ports[(i, i)], 4791)
            spine = seen[(flow.src, flow.dst, flow.sport, flow.dport)]
            assert spine == predict_path(plan, flow)[2], flow
            used.add(spine)
        perfect += len(used) == k
    expect = math.factorial(k) / k ** k
    sigma = math.sqrt(expect * (1 - expect) / len(trials))
    assert abs(perfect / len(trials) - expect) < 4 * sigma, (perfect, len(trials), expect)


def _marks(fabric: Fabric, leaf: str, port: int) -> int:
    async def read() -> int:
        sw = fabric.plan.switch(leaf)
        opts = fy.SwitchOptions(device_id=sw.device_id, initial_election_id=5)
        async with fy.Switch(leaf, sw.grpc_address, opts) as conn:
            entries = [e async for e in conn.read(fy.P4CounterEntry("ecn_marked_counter", index=port))]
            return entries[0].data.packet_count if entries and entries[0].data else 0
    return asyncio.run(asyncio.wait_for(read(), 20))


def _handled(fabric: Fabric, switch: str, port: int) -> int:
    """Frames the queue of ``port`` has finished with: sent (its egress pipeline, and so
    its ECN marking, has run) or tail-dropped."""
    with grpc.insecure_channel(fabric.plan.switch(switch).grpc_address) as channel:
        stats = QueueControlClient(channel).queue_stats()[port]
    return int(stats["sent_packets"]) + int(stats["drops"])


def _paced(fabric: Fabric, senders: list[tuple[Nic, Nic, int]], mbps: float, seconds: float) -> int:
    """Each (src, dst, sport) sends ECT 1000-byte UDP frames at ``mbps``, in 2 ms steps,
    of the fabric's emulated time (its links' rates are emulated Mbit/s: with a dilation
    above 1, wall-clock pacing would send too fast), never more than a step's frames at
    once; returns the frames sent."""
    plan = fabric.plan
    clock = fabric.clock
    per_step = mbps * 1e6 / 8 / 1000 * 0.002
    socks = [host_socket(fabric.host(src.server).pid, src.intf) for src, _, _ in senders]
    opened = [s.__enter__() for s in socks]
    try:
        data = [frame(plan, src, dst, sport, size=1000, tos=2) for src, dst, sport in senders]
        start = clock.now()
        scheduled, sent = 0.0, 0     # frames the schedule let out (sent or skipped); sent
        while (now := clock.now()) - start < seconds:
            due = (now - start) / 0.002 * per_step
            # Held off the CPU (this process is not real-time), the sender skips what it
            # missed instead of sending it in one burst at line rate, which builds a queue
            # the pacing never would: a fresh-clone CI run saw the lone 70 % sender marked
            # twice so. At most a step's frames go at once.
            scheduled = max(scheduled, due - per_step)
            while scheduled < due:
                for sock, d in zip(opened, data):
                    sock.send(d)
                scheduled += 1
                sent += 1
            clock.sleep(0.001)
    finally:
        for s in socks:
            s.__exit__(None, None, None)
    return sent * len(senders)


def test_ecn_marks_only_when_two_senders_oversubscribe_a_leaf_uplink(fabric: Fabric) -> None:
    plan = fabric.plan
    a, b = plan.server_at(0, 0).nics[0], plan.server_at(0, 1).nics[0]
    c, d = plan.server_at(1, 0).nics[0], plan.server_at(1, 1).nics[0]
    leaf = plan.switch(a.leaf)
    uplink = plan.uplink_port(0)
    sport_a = source_port_for_spine(plan, FiveTuple(a.ip, c.ip), 0)
    sport_b = source_port_for_spine(plan, FiveTuple(b.ip, d.ip), 0)
    rate = UPLINK_MBPS * 0.7
    before = _marks(fabric, leaf.name, uplink)
    start = _handled(fabric, leaf.name, uplink)
    sent = _paced(fabric, [(a, c, sport_a)], rate, 0.6)
    # The marks are counted once the uplink's queue is done with every frame sent.
    wait_for("the lone sender's frames through the uplink queue",
             lambda: _handled(fabric, leaf.name, uplink) - start >= sent, 10, 0.1)
    alone = _marks(fabric, leaf.name, uplink) - before
    sent += _paced(fabric, [(a, c, sport_a), (b, d, sport_b)], rate, 0.6)
    wait_for("both senders' frames through the uplink queue",
             lambda: _handled(fabric, leaf.name, uplink) - start >= sent, 10, 0.1)
    together = _marks(fabric, leaf.name, uplink) - before - alone
    assert alone == 0
    assert together > 10


def test_sampled_roce_packets_reach_the_controller_with_port_metadata(fabric: Fabric) -> None:
    plan = fabric.plan
    src, dst = plan.server_at(0, 1).nics[2], plan.server_at(1, 0).nics[2]
    leaf = plan.switch(src.leaf)
    sports = range(50000, 50064)
    frames = [frame(plan, src, dst, sport, roce=True) for sport in sports]
    expected_egress = {plan.uplink_port(int(predict_path(plan, FiveTuple(src.ip, dst.ip, 17, s, 4791))[2][-1]))
                       for s in sports}

    # The skip between samples is random with mean sample_rate: 16 samples expected
    # of 64 frames, at least 4 all but certain.
    enough = len(frames) // plan.spec.sample_rate // 4

    async def collect() -> list:
        opts = fy.SwitchOptions(device_id=leaf.device_id, initial_election_id=50)
        async with fy.Switch(leaf.name, leaf.grpc_address, opts) as conn:
            assert conn.is_primary
            packets = conn.read_packets()
            pins = []

            async def take() -> None:
                async for pin in packets:
                    pins.append(pin)
                    if len(pins) == enough:
                        return

            waiting = asyncio.ensure_future(take())
            # One turn of the loop runs the reader to its first await, which registers
            # its queue: no PacketIn of the frames sent from here on is missed.
            await asyncio.sleep(0)
            await asyncio.to_thread(send, fabric, src, frames)
            await asyncio.wait_for(waiting, 10)
            return pins

    pins = asyncio.run(asyncio.wait_for(collect(), 30))
    assert len(pins) >= enough
    for pin in pins:
        assert pin.metadata["ingress_port"] == src.leaf_port
        assert pin.metadata["switch_id"] == leaf.switch_id
        assert pin.metadata["egress_port"] in expected_egress
        sent = Ether(pin.payload)
        assert sent[IP].src == src.ip and BTH in sent
