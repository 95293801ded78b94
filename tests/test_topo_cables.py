"""topo.cables without a kernel: what a `Cable` asks of `ip`, in whose namespace, and a
refused cable's error (the fabric tests lay and cut real ones: test_fabric_bringup,
test_fabric_run)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from topo.cables import Cable, CableError, CableNet


class Node:
    """What Mininet's Link and Intf use of a node, recording its shell's commands; ``ip``
    refuses a cable whose line names ``refuse``."""

    def __init__(self, name: str, pid: int, refuse: str = "") -> None:
        self.name, self.pid, self.refuse = name, pid, refuse
        self.intfs: dict[int, object] = {}
        self.commands: list[str] = []

    def newPort(self) -> int:
        return len(self.intfs)

    def addIntf(self, intf, port=None, moveIntfFn=None) -> None:
        self.intfs[port] = intf

    def cmd(self, *args: str, **_: object) -> str:
        line = " ".join(args)
        self.commands.append(line)
        lines = re.findall(r"'([^']*)'", line.removeprefix("printf '%s\\n' "))
        for number, command in enumerate(lines, 1):
            if self.refuse and self.refuse in command:
                return f"RTNETLINK answers: File exists\nCommand failed -:{number}\n"
        return ""


def test_a_cable_runs_nothing_until_laid_then_one_batch_per_node() -> None:
    host, leaf, spine = Node("h", 101), Node("l", 102), Node("s", 103)
    try:
        Cable(host, leaf, port1=0, port2=1, intfName1="h-eth0", intfName2="l-eth1", addr1="00:00:0a:00:00:01")
        Cable(host, leaf, port1=1, port2=2, intfName1="h-eth1", intfName2="l-eth2")
        Cable(leaf, spine, port1=3, port2=1, intfName1="l-eth3", intfName2="s-eth1")
        # Mininet would have made each pair and brought each end up (`ifconfig ... up`).
        assert host.commands == leaf.commands == spine.commands == []
        CableNet.lay_cables(SimpleNamespace(hosts=[host], switches=[leaf, spine]))
    finally:
        for node in (host, leaf, spine):
            Cable.unlaid.pop(node, None)
    assert len(host.commands) == len(leaf.commands) == 1 and spine.commands == []
    assert re.findall(r"'([^']*)'", host.commands[0].removeprefix("printf '%s\\n' ")) == [
        "link add name h-eth0 address 00:00:0a:00:00:01 type veth peer name l-eth1 netns 102",
        "link add name h-eth1 type veth peer name l-eth2 netns 102"]
    assert host.commands[0].endswith("| ip -batch -")
    assert "'link add name l-eth3 type veth peer name s-eth1 netns 103'" in leaf.commands[0]
    assert sorted(host.intfs) == [0, 1] and sorted(spine.intfs) == [1]


def test_a_refused_cable_names_its_node_and_command_and_leaves_nothing_recorded() -> None:
    leaf, spine = Node("l", 102, refuse="l-eth3"), Node("s", 103)
    net = SimpleNamespace(hosts=[], switches=[leaf, spine])
    try:
        Cable(leaf, spine, port1=3, port2=1, intfName1="l-eth3", intfName2="s-eth1")
        with pytest.raises(CableError, match=r"laying l's cables failed: RTNETLINK answers: File exists\n"
                                             r"Command failed -:1\nin: printf .*'link add name l-eth3 .*"):
            CableNet.lay_cables(net)
    finally:
        Cable.unlaid.pop(leaf, None)
    assert leaf not in Cable.unlaid


def test_a_nodes_commands_stop_at_the_first_that_prints():
    """`topo.ipbatch.first_refusal`, as the cables, the MTUs and the hosts' settings use
    it: what a refused command printed and the command, and nothing run after it."""
    from topo.ipbatch import first_refusal

    ran: list[str] = []
    node = SimpleNamespace(cmd=lambda c: ran.append(c) or (" Error: no such device \n" if c == "b" else ""))
    assert first_refusal(node, ["a", "b", "c"]) == ("Error: no such device", "b") and ran == ["a", "b"]
    assert first_refusal(node, ["a", "c"]) is None and first_refusal(node, []) is None
