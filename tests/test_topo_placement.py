"""The spec's ``cluster`` section and the placement of nodes on machines (no root)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from testbed.run import with_servers
from topo.addressing import AddressPlan
from topo.cluster import ClusterFabric, fabric_for, ssh_options
from topo.net import Fabric, FabricError
from topo.placement import LOCALHOST, block_server, spine_server
from topo.spec import ClusterSpec, SpecError, parse_spec

BASE = {"blocks": 4, "servers_per_block": 2, "rails": 2, "spines": 3}


def spec_with(cluster: object, **top: object):
    return parse_spec({**BASE, **top, "cluster": cluster}, "f.yaml")


def test_cluster_section_parses():
    spec = spec_with({"servers": ["10.9.0.2", "gpu-b"], "link": "ssh", "ssh_config": "cfg"})
    assert spec.cluster == ClusterSpec(servers=("10.9.0.2", "gpu-b"), link="ssh", ssh_config="cfg")
    assert spec_with({"servers": ["a"]}).cluster.link == "gre"
    assert parse_spec(BASE).cluster is None
    assert parse_spec({**BASE, "cluster": None}).cluster is None


def test_a_dumped_spec_reads_back():
    # GOR and the experiments write the running spec as YAML for the agents.
    for spec in (parse_spec(BASE), spec_with({"servers": ["a", "b"], "link": "ssh"})):
        assert parse_spec(yaml.safe_load(yaml.safe_dump(dataclasses.asdict(spec)))) == spec


@pytest.mark.parametrize("cluster, message", [
    ({"link": "ssh"}, "f.yaml: cluster.servers: missing"),
    ({"servers": "a b"}, "f.yaml: cluster.servers: expected list"),
    ({"servers": ["a", 3]}, "f.yaml: cluster.servers[1]: a host name or address, got 3"),
    ({"servers": ["a", "b c"]}, "cluster.servers[1]: a host name or address"),
    ({"servers": []}, "cluster.servers: at least one server"),
    ({"servers": ["a", "a"]}, "cluster.servers: each server once"),
    ({"servers": ["a", "b", "c", "d", "e"]}, "cluster.servers: whole blocks go to a server, so at most blocks = 4"),
    ({"servers": ["a"], "link": "vxlan"}, "f.yaml: cluster.link: one of gre, ssh, got 'vxlan'"),
    ({"servers": ["a"], "port": 22}, "f.yaml: cluster.port: unknown key"),
    (["a"], "f.yaml: cluster: expected dict or NoneType"),
])
def test_cluster_errors_name_the_key(cluster, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        spec_with(cluster)


def test_whole_blocks_per_server_and_spines_round_robin():
    spec = spec_with({"servers": ["s0", "s1", "s2"]}, blocks=5)
    # Contiguous runs of blocks, sizes differing by at most one.
    assert [block_server(spec, b) for b in range(5)] == ["s0", "s0", "s1", "s1", "s2"]
    assert [spine_server(spec, k) for k in range(3)] == ["s0", "s1", "s2"]
    plan = AddressPlan(spec)
    placed = plan.node_servers()
    assert set(placed) == {s.name for s in plan.servers} | {sw.name for sw in plan.switches}
    for server in plan.servers:
        for nic in server.nics:
            assert placed[nic.server] == placed[nic.leaf] == block_server(spec, server.block)
    crossing = plan.crossing_links()
    spines = {sp.name for sp in plan.spines}
    # Only leaf-spine cables cross machines: each leaf reaches the spines not on its server.
    assert all(link.b in spines and link.a not in spines for link in crossing)
    assert len(crossing) == sum(1 for leaf in plan.leaves for sp in plan.spines
                                if placed[leaf.name] != placed[sp.name])
    assert len(crossing) == plan.spec.leaves * 2


def test_three_tiers_spread_spines_and_super_spines_over_the_servers():
    spec = spec_with({"servers": ["s0", "s1"]}, pods=2, super_spines=2, spines=2)
    plan = AddressPlan(spec)
    placed = plan.node_servers()
    assert set(placed) == {s.name for s in plan.servers} | {sw.name for sw in plan.switches}
    upper = [*plan.spines, *plan.super_spines]
    # One count over both tiers: each server gets half of them, the super-spines too.
    assert [placed[sw.name] for sw in upper] == ["s0", "s1"] * (len(upper) // 2)
    assert {placed[ss.name] for ss in plan.super_spines} == {"s0", "s1"}
    leaves = {leaf.name for leaf in plan.leaves}
    # Blocks stay whole: no cable from a NIC crosses, and every crossing cable is above a leaf.
    assert all(link.a not in {s.name for s in plan.servers} for link in plan.crossing_links())
    assert all(link.b not in leaves for link in plan.crossing_links())


def test_switches_serve_p4runtime_on_their_machine():
    plan = AddressPlan(spec_with({"servers": ["10.9.0.2", LOCALHOST]}, grpc_port_base=40000))
    leaf = plan.leaf(0, 0)
    assert leaf.grpc_address == f"10.9.0.2:{leaf.grpc_port}"
    assert plan.leaf(3, 1).grpc_address == f"127.0.0.1:{plan.leaf(3, 1).grpc_port}"
    assert plan.spines[1].grpc_address == f"127.0.0.1:{plan.spines[1].grpc_port}"
    # Without a cluster everything is on this machine.
    assert {sw.grpc_address.split(":")[0] for sw in AddressPlan(parse_spec(BASE)).switches} == {"127.0.0.1"}
    assert set(AddressPlan(parse_spec(BASE)).node_servers().values()) == {LOCALHOST}


def test_make_run_servers_option():
    spec = with_servers(parse_spec(BASE), "10.9.0.2, 10.9.0.3")
    assert spec.cluster == ClusterSpec(servers=("10.9.0.2", "10.9.0.3"))
    kept = with_servers(spec_with({"servers": ["x"], "link": "ssh", "ssh_config": "c"}), "a b")
    assert kept.cluster == ClusterSpec(servers=("a", "b"), link="ssh", ssh_config="c")
    with pytest.raises(SpecError, match="cluster.servers: each server once"):
        with_servers(parse_spec(BASE), "a a")


def test_a_cluster_spec_needs_the_cluster_fabric(tmp_path):
    spec = spec_with({"servers": ["a", "b"], "ssh_config": str(tmp_path / "none.conf")})
    with pytest.raises(FabricError, match="cluster: fabric 'fabric' runs over a, b: bring it up with "
                                          "topo.cluster.fabric_for"):
        Fabric(spec)
    assert isinstance(fabric_for(parse_spec(BASE)), Fabric)
    with pytest.raises(FabricError, match=f"cluster.ssh_config: no such file: {tmp_path / 'none.conf'}"):
        ssh_options(spec.cluster)
    with pytest.raises(FabricError, match="cluster: backend bmv2 cannot run on remote servers"):
        ClusterFabric(spec, backend="bmv2")


@pytest.mark.parametrize("node_class", ["ClusterHost", "ClusterP4SimSwitch"])
def test_a_cluster_nodes_processes_get_their_group_without_a_python_preexec_fn(node_class, monkeypatch):
    """Mininet's RemoteMixin made each process's group with ``preexec_fn=os.setpgrp``:
    a fork of the whole launcher, where gRPC's fork handlers printed into the node's
    shell (topo.cluster.SshOptionsMixin). The group now comes from ``process_group=0``
    (subprocess's vfork path): the child leads a group of its own all the same."""
    import subprocess
    import sys

    import mininet.node

    from topo import cluster

    node = object.__new__(getattr(cluster, node_class))
    node.isRemote, node.user = False, None       # a node on this machine: no ssh around it
    seen: list[dict] = []
    real = mininet.node.Popen

    def recording(cmd, **params):
        seen.append(params)
        return real(cmd, **params)

    monkeypatch.setattr(mininet.node, "Popen", recording)
    proc = node._popen([sys.executable, "-c", "import os; print(os.getpid(), os.getpgrp())"],
                       stdout=subprocess.PIPE, text=True)
    pid, pgid = map(int, proc.communicate(timeout=30)[0].split())
    assert seen[0]["preexec_fn"] is None and seen[0]["process_group"] == 0
    assert pgid == pid == proc.pid
