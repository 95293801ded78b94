"""The addressing plan: unique names, ids, addresses and ports; the topology graph."""

from __future__ import annotations

import ipaddress

import networkx as nx
import pytest

from topo.addressing import AddressPlan, salt_of
from topo.spec import FabricSpec, SpecError

SPEC = FabricSpec(blocks=2, servers_per_block=2, rails=4, spines=2)


def test_counts_and_unique_identities():
    plan = AddressPlan(SPEC)
    assert len(plan.leaves) == 8 and len(plan.spines) == 2 and len(plan.servers) == 4
    ids = [sw.switch_id for sw in plan.switches]
    assert sorted(ids) == list(range(1, 11))
    assert len({sw.mac for sw in plan.switches}) == 10
    assert len({sw.grpc_port for sw in plan.switches}) == 10
    assert len({sw.salt for sw in plan.switches}) == 10
    nics = list(plan.nics())
    assert len(nics) == 16
    assert len({n.ip for n in nics}) == len({n.mac for n in nics}) == 16


def test_nic_addressing_follows_rail_block_server():
    plan = AddressPlan(SPEC)
    nic = plan.server("b1h0").nics[3]
    assert (nic.ip, nic.mac, nic.intf) == ("10.3.1.1", "02:00:0a:03:01:01", "b1h0-eth3")
    assert nic.leaf == "b1l3" and nic.leaf_port == 1 and nic.gateway_ip == "10.3.1.254"
    assert plan.nic("10.3.1.1") == nic
    assert plan.server_at(1, 0).nics[3] == nic
    assert ipaddress.IPv4Address(nic.ip) in ipaddress.IPv4Network(plan.rail_block_subnet(3, 1))


def test_ports_and_peers():
    plan = AddressPlan(SPEC)
    leaf = plan.leaf(1, 2)
    assert leaf.name == "b1l2" and leaf.switch_id == 7
    assert plan.uplink_port(0) == 3 and plan.uplink_port(1) == 4
    assert plan.peer("b1l2", 4) == ("sp1", plan.spine_port(1, 2))
    assert plan.peer("sp1", plan.spine_port(1, 2)) == ("b1l2", 4)
    assert plan.peer("b1l2", 2) == ("b1h1", 2)
    assert plan.port_rates("b1l2") == {1: 10.0, 2: 10.0, 3: 10.0, 4: 10.0}
    assert sorted(plan.port_rates("sp0")) == list(range(1, 9))


def test_switch_grpc_and_salt_are_functions_of_the_id():
    plan = AddressPlan(FabricSpec(blocks=1, servers_per_block=1, rails=1, spines=1, grpc_port_base=40000))
    leaf, spine = plan.switches
    assert (leaf.grpc_port, spine.grpc_port) == (40000, 40001)
    assert leaf.grpc_address == "127.0.0.1:40000" and leaf.device_id == 1
    assert leaf.salt == salt_of(1) != spine.salt


@pytest.mark.parametrize("blocks, rails, servers, spines", [(63, 1, 60, 3), (1, 63, 60, 3), (9, 7, 50, 13)])
def test_prefix_keeps_interface_names_short(blocks, rails, servers, spines):
    plan = AddressPlan(FabricSpec(blocks=blocks, servers_per_block=servers, rails=rails, spines=spines,
                                  node_prefix="t999"))
    names = [f"{sw.name}-eth{port}" for sw in plan.switches for port in plan.port_rates(sw.name)]
    names += [nic.intf for nic in plan.nics()]
    assert max(map(len, names)) <= 15
    assert all(s.name.startswith("t999") for s in plan.servers)


def test_plan_refuses_an_invalid_spec():
    with pytest.raises(SpecError, match="rails"):
        AddressPlan(FabricSpec(blocks=1, servers_per_block=1, rails=0, spines=1))


def test_graph_is_the_leaf_spine_topology():
    plan = AddressPlan(SPEC)
    g = plan.graph()
    assert g.number_of_nodes() == 4 + 10
    assert g.number_of_edges() == 16 + 8 * 2
    assert g.nodes["sp0"]["role"] == "spine" and g.nodes["b0h1"]["role"] == "server"
    assert g.edges["b0l0", "sp1"]["ports"] == {"b0l0": 4, "sp1": 1}
    # every server pair is 2 hops (same leaf) or 4 hops (via a spine) apart
    paths = list(nx.all_shortest_paths(g, "b0h0", "b1h0"))
    assert all(len(p) == 5 for p in paths)
    assert {p[2] for p in paths} == {"sp0", "sp1"}
    assert nx.shortest_path_length(g, "b0h0", "b0h1") == 2


def test_an_eight_nic_servers_commands_fit_the_terminal_line_in_order():
    """Mininet types a host's commands into its shell's terminal, which keeps 4095
    characters of a line: block8's servers (8 NICs) need several lines."""
    import re
    from pathlib import Path

    from topo.ipbatch import MAX_COMMAND_LINE, shell_batches
    from topo.net import host_commands
    from topo.spec import load_spec

    plan = AddressPlan(load_spec(Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "block8.yaml"))
    server = plan.servers[0]
    cmds = host_commands(plan, server)
    batches = shell_batches(cmds)
    assert len("; ".join(cmds)) > 4095 and len(batches) > 1
    # A line is one command or several under the limit; one `ip -batch` may pass it by
    # its own prefix, never the terminal's 4095.
    assert all(len("; ".join(b)) <= MAX_COMMAND_LINE or len(b) == 1 for b in batches)
    assert all(len("; ".join(b)) < 4095 for b in batches)
    assert [c for b in batches for c in b] == cmds
    # Every NIC's address, gateway and policy rule is among the `ip -batch` lines, in
    # NIC order, and one sysctl turns every NIC's reverse-path filter off.
    ip_lines = [line for c in cmds if c.endswith("| ip -batch -")
                for line in re.findall(r"'([^']*)'", c.removeprefix("printf '%s\\n' "))]
    assert len(ip_lines) == 7 * len(server.nics) and len([c for c in cmds if "ip -batch" in c]) > 1
    assert [line for line in ip_lines if line.startswith("addr replace")] == \
        [f"addr replace {nic.ip}/32 dev {nic.intf}" for nic in server.nics]
    assert all(f"net.ipv4.conf.{nic.intf}.rp_filter=0" in cmds[0] for nic in server.nics)


def test_interface_mtus_are_set_one_shell_line_per_node_and_a_failure_names_its_interface():
    """The cables' MTU goes through each node's shell once (a round trip costs ~2 ms,
    per interface it was 0.12 s of every fabric start); an interface the kernel refuses
    fails the start naming the node and the interface."""
    import re
    from pathlib import Path
    from types import SimpleNamespace

    from topo.net import Fabric, FabricError
    from topo.spec import load_spec

    class Node:
        def __init__(self, name: str, refuse: str = "") -> None:
            self.name, self.refuse, self.lines = name, refuse, []

        def cmd(self, line: str) -> str:
            """As `ip -batch` answers the lines it is given: the first it refuses, by number."""
            self.lines.append(line)
            batch = re.findall(r"'(link set dev \S+ mtu \d+ up)'", line)
            assert line.endswith("| ip -batch -") and batch
            for number, command in enumerate(batch, 1):
                if self.refuse and f"dev {self.refuse} " in command:
                    return f"Error: argument is wrong.\nCommand failed -:{number}\n"
            return ""

    def intf(node: Node, name: str) -> SimpleNamespace:
        return SimpleNamespace(node=node, name=name)

    fabric = Fabric(load_spec(Path(__file__).resolve().parent.parent / "topo" / "fabrics" / "default.yaml"))
    host, leaf, spine = Node("h"), Node("l"), Node("s")
    links = [SimpleNamespace(intf1=intf(host, f"h-eth{i}"), intf2=intf(leaf, f"l-eth{i}")) for i in range(3)]
    links.append(SimpleNamespace(intf1=intf(leaf, "l-eth9"), intf2=intf(spine, "s-eth0")))
    fabric.net = SimpleNamespace(links=links)
    fabric._set_mtu()
    assert [len(n.lines) for n in (host, leaf, spine)] == [1, 1, 1]
    assert leaf.lines[0].count(f"mtu {fabric.spec.iface_mtu}") == 4
    leaf.refuse = "l-eth9"
    with pytest.raises(FabricError, match=r"l's interfaces failed: Error: argument is wrong.\nCommand failed -:4\n"
                                          r"in: printf .*'link set dev l-eth9 mtu 4200 up' \| ip -batch -"):
        fabric._set_mtu()
