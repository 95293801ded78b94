"""A fabric split over two machines on Mininet's cluster mode (root).

The two "servers" are network namespaces on this machine, each with its own sshd
(`tests/ssh_servers.py`), each with its own PID space, the second with a CLOCK_MONOTONIC
`MONOTONIC_AHEAD_S` ahead (a time namespace), as two machines' clocks differ; the fabric
(2 blocks x 1 server x 2 rails, 2 spines) is a `topo.cluster.ClusterFabric` over them,
one block and one spine per server. Checked:

* every node runs on the server the placement names, each switch serves P4Runtime on
  its server's address;
* pings cross the machine boundary, a ring AllReduce (tccl agents) completes with the
  right result;
* the cables between servers are Mininet tunnels between the two servers' addresses
  (gretap when the kernel has GRE, else tap devices joined by ``ssh -w``), the others
  veth pairs inside one server;
* the servers' clock offsets are measured (the second's within the error bound of
  `MONOTONIC_AHEAD_S`), and every switch and agent reads the fabric's clock shifted by
  its server's offset, with the same dilation;
* a GRE fabric on a kernel without GRE, and a server without sshd, fail before
  anything is built, naming ``cluster.link`` / ``cluster.servers`` and the server;
* GOR, on this machine, repairs a cable between two switches of the second server (a
  cable whose interfaces exist only there) by the switches' own port reports, and
  puts it back in service when it is up again;
* stopping the fabric leaves nothing running on the servers but their sshd, not even
  a process that outlived the ssh that started it in a remote host.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(p) for p in ("mnexec", "sudo", "/usr/sbin/sshd")),
    reason="needs root, Mininet, sudo and openssh-server")

from controller.config import default_config  # noqa: E402
from controller.gor import Gor  # noqa: E402
from controller.routes import cable, ecmp_members, program_fabric  # noqa: E402
from emulation.clock import EmulationClock  # noqa: E402
from tccl.job import Transport, Workload, job_from_fabric  # noqa: E402
from tccl.launch import agent_command, run_on_fabric  # noqa: E402
from topo.cluster import ClusterFabric, check_gre  # noqa: E402
from topo.net import FabricError  # noqa: E402
from topo.placement import LOCALHOST  # noqa: E402
from topo.spec import load_spec  # noqa: E402

from ssh_servers import SshServers  # noqa: E402
from testkit import wait_for  # noqa: E402


def gre_supported() -> bool:
    try:
        check_gre(LOCALHOST, [])
    except FabricError:
        return False
    return True


LINK = "gre" if gre_supported() else "ssh"
# The second server's CLOCK_MONOTONIC is this much ahead of the first's (and this one's).
MONOTONIC_AHEAD_S = 1000


def write_spec(path: Path, servers: SshServers, link: str) -> Path:
    path.write_text(f"""\
name: cluster
blocks: 2
servers_per_block: 1
rails: 2
spines: 2
dilation: 2
node_prefix: m{os.getpid() % 1000}
cluster:
  servers: [{servers.ips[0]}, {servers.ips[1]}]
  link: {link}
  ssh_config: {servers.ssh_config}
""")
    return path


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[SshServers]:
    tmp = tmp_path_factory.mktemp("cluster")
    # MininetCluster makes $HOME/.ssh/mn: keep it in the test's directory.
    home = os.environ.get("HOME")
    os.environ["HOME"] = str(tmp)
    try:
        with SshServers(tmp, monotonic_offsets_s=(0, MONOTONIC_AHEAD_S)) as ssh_servers:
            yield ssh_servers
        for ns in ssh_servers.namespaces + [ssh_servers.lan_ns]:
            assert not Path(f"/run/netns/{ns}").exists()
    finally:
        if home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = home


@pytest.fixture(scope="module")
def fabric(servers) -> Iterator[tuple[ClusterFabric, Path]]:
    spec_path = write_spec(servers.workdir / "fabric.yaml", servers, LINK)
    with ClusterFabric(load_spec(spec_path), run_dir=servers.workdir / "run", program=program_fabric) as fab:
        yield fab, spec_path
    # Nothing of the fabric outlives it: only each server's sshd (its PID 1) is left.
    for i in range(len(servers.ips)):
        assert list(servers.processes(i)) == [1], servers.processes(i)


def server_index(servers: SshServers, fab: ClusterFabric, node: str) -> int:
    return servers.ips.index(fab.placement[node])


def link_info(servers: SshServers, index: int, intf: str) -> dict:
    """``ip -d -j link show`` of an interface in server ``index``'s root namespace."""
    return json.loads(servers.run(index, "ip", "-d", "-j", "link", "show", "dev", intf))[0]


def test_whole_blocks_per_server(servers, fabric):
    fab, _ = fabric
    plan = fab.plan
    for block in range(plan.spec.blocks):
        names = [s.name for s in plan.servers if s.block == block] + \
                [leaf.name for leaf in plan.leaves if leaf.block == block]
        assert {fab.placement[n] for n in names} == {servers.ips[block]}
    assert [fab.placement[sp.name] for sp in plan.spines] == servers.ips
    processes = [servers.processes(i) for i in range(len(servers.ips))]
    for name, server in fab.placement.items():
        # Its shell runs on that server (the node's PID is the server's numbering).
        argv = processes[servers.ips.index(server)][fab.net.get(name).pid]
        assert argv[-1] == f"mininet:{name}"
    for sw in plan.switches:
        assert sw.grpc_address == f"{fab.placement[sw.name]}:{sw.grpc_port}"
        assert fab.net.get(sw.name).grpc_host == fab.placement[sw.name]


def test_ping_across_machines(fabric):
    fab, _ = fabric
    src = fab.plan.server_at(0, 0)
    for dst in (fab.plan.server_at(1, 0).nics[0], fab.plan.server_at(1, 0).nics[1]):
        out = fab.host(src.name).cmd(f"ping -c 3 -W 5 -I {src.nics[0].ip} {dst.ip}")
        assert " 0% packet loss" in out, out


def test_allreduce_across_machines(fabric, tmp_path):
    fab, spec_path = fabric
    job = job_from_fabric(spec_path, Workload(op="allreduce", sizes=(16 * 1024,), iters=1, warmup=1),
                          Transport(ports="orthogonal"), name="cluster-allreduce")
    results = run_on_fabric(fab, job, tmp_path, timeout=150)
    assert set(results) == {s.name for s in fab.plan.servers}
    for server, res in results.items():
        assert res["rows"][0]["wrong"] == 0, server
        assert res["rows"][0]["busbw_mbps"] > 0
    # Rail order: the ring crosses the spines (and so the machines) between blocks.
    assert next(iter(results.values()))["ring_hops"]["spine"] == fab.spec.blocks


def test_cross_machine_cables_are_tunnels_between_the_servers(servers, fabric):
    fab, _ = fabric
    plan = fab.plan
    crossing = plan.crossing_links()
    spines = {sp.name for sp in plan.spines}
    # Every leaf reaches the spine of the other server.
    assert len(crossing) == plan.spec.leaves * plan.spec.spines // 2
    assert all((link.a in spines) != (link.b in spines) for link in crossing)
    hosts = {server.name for server in plan.servers}
    for link in plan.links:
        ends = [(node, server_index(servers, fab, node), plan.intf(node, port))
                for node, port in ((link.a, link.a_port), (link.b, link.b_port))]
        kinds = []
        for (node, index, intf), (_, other, _) in zip(ends, reversed(ends)):
            if node in hosts:   # a NIC lives in its host's namespace
                info = json.loads(fab.host(node).cmd(f"ip -d -j link show dev {intf}"))[0]
            else:               # a switch port in its server's root namespace
                info = link_info(servers, index, intf)
            kind = info["linkinfo"]["info_kind"]
            kinds.append(kind)
            if link in crossing and kind == "gretap":
                data = info["linkinfo"]["info_data"]
                assert (data["local"], data["remote"]) == (servers.ips[index], servers.ips[other])
            elif link in crossing:
                assert info["linkinfo"]["info_data"]["type"] == "tap"
            assert info["mtu"] == plan.spec.iface_mtu
        assert kinds == (["gretap" if LINK == "gre" else "tun"] * 2 if link in crossing else ["veth"] * 2)
    if LINK == "ssh":
        # One `ssh -w` per crossing cable, run on one server towards the other.
        tunnels = []
        for index in range(len(servers.ips)):
            for argv in servers.processes(index).values():
                if argv[0] == "ssh" and "Tunnel=Ethernet" in argv:
                    tunnels.append((index, next(a.split("@")[1] for a in argv if "@" in a)))
        assert len(tunnels) == len(crossing)
        assert all(servers.ips[index] != peer and peer in servers.ips for index, peer in tunnels)


def test_a_process_started_in_a_remote_host_runs_there(servers, fabric):
    fab, _ = fabric
    host = fab.plan.server_at(1, 0).name
    marker = f"{os.getpid()}.5"       # a unique argument to find it by

    def running() -> list[int]:
        return [pid for pid, argv in servers.processes(1).items() if argv == ["sleep", marker]]

    proc = fab.host(host).popen(["sleep", marker], cwd="/")
    try:
        wait_for("the sleep on the remote server", running, 20, 0.1)
    finally:
        proc.kill()     # the ssh client here; the sleep on the server outlives it
        proc.wait()
    # Still there: the fabric's stop ends it (the fixture checks that nothing is left).
    assert running()


def test_one_clock_across_servers(servers, fabric):
    fab, _ = fabric
    assert set(fab.offsets) == set(servers.ips)
    for server, ahead_s in zip(servers.ips, servers.monotonic_offsets_s):
        offset = fab.offsets[server]
        assert abs(offset.ns - ahead_s * 10**9) <= offset.error_ns, (server, offset)
    processes = [servers.processes(i) for i in range(len(servers.ips))]
    for sw in fab.plan.switches:
        argv = processes[server_index(servers, fab, sw.name)][fab.net.get(sw.name).remote_pid]
        expected = fab.clock.shifted(fab.offsets[fab.placement[sw.name]].ns)
        assert EmulationClock.decode(argv[argv.index("--clock") + 1]) == expected
    for server in fab.plan.servers:
        cmd = agent_command(fab, Path("job.yaml"), server.name, Path("run"))
        clock = EmulationClock.decode(cmd[cmd.index("--clock") + 1])
        assert clock == fab.clock.shifted(fab.offsets[fab.placement[server.name]].ns)
        assert clock.dilation == fab.clock.dilation == 2.0


def test_gor_repairs_a_cable_of_a_switch_on_the_second_machine(servers, fabric, tmp_path):
    """The leaf of block 1 and a spine, both on the second server: their cable's
    interfaces are not on this machine (GOR's), so only the switches' own reports can
    tell GOR it went down."""
    fab, _ = fabric
    plan = fab.plan
    leaf = plan.leaf(1, 0)
    spine = next(sp for sp in plan.spines if fab.placement[sp.name] == servers.ips[1])
    assert fab.placement[leaf.name] == servers.ips[1]
    assert not Path(f"/sys/class/net/{plan.intf(leaf.name, plan.uplink_port(spine.spine))}").exists()
    assert fab.pipeline is not None
    key = cable(leaf.name, spine.name)
    with Gor(plan, fab.pipeline, tmp_path, default_config(plan), fabric=fab) as gor:
        def last_events() -> str:
            return str([e["event"] for e in gor.events.snapshot()[-10:]])

        assert not gor.down
        fab.net.configLinkStatus(leaf.name, spine.name, "down")
        try:
            wait_for("GOR to route around the second server's cable", lambda: gor.down == {key}, 20,
                     detail=last_events)
            others = [l.name for l in plan.leaves if l.name != leaf.name]
            assert all(spine.spine not in ecmp_members(plan, o, leaf.name, gor.down) for o in others)
            assert any(e["event"] == "repaired" for e in gor.events.snapshot())
        finally:
            fab.net.configLinkStatus(leaf.name, spine.name, "up")
        wait_for("the cable back in service", lambda: not gor.down, 20, detail=last_events)


@pytest.mark.skipif(LINK == "gre", reason="this kernel has GRE: the fabric above runs on it")
def test_gre_without_kernel_support_fails_naming_the_key(servers, tmp_path):
    spec = load_spec(write_spec(tmp_path / "gre.yaml", servers, "gre"))
    before = servers.run(0, "ip", "-br", "link")
    with pytest.raises(FabricError, match=re.escape(f"cluster.link: gre: {servers.ips[0]} cannot create GRE")):
        ClusterFabric(spec, run_dir=tmp_path / "run").start()
    assert servers.run(0, "ip", "-br", "link") == before


def test_unreachable_server_fails_naming_it(servers, tmp_path):
    spec_path = write_spec(tmp_path / "down.yaml", servers, "ssh")
    down = f"{servers.prefix}.250"       # on the LAN, no machine there
    spec_path.write_text(spec_path.read_text().replace(servers.ips[1], down))
    with pytest.raises(FabricError, match=re.escape(f"cluster.servers: {down}: cannot run this repository's python")):
        ClusterFabric(load_spec(spec_path), run_dir=tmp_path / "run").start()
