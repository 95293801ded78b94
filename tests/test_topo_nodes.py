"""The switch nodes' command lines, p4sim and BMv2, and their real-time priorities (no
root needed)."""

from __future__ import annotations

from emulation.realtime import agent_priority, realtime_prefix
from topo.nodes import BMv2Switch, P4ProcessSwitch, P4SimSwitch


def _node(cls: type[P4ProcessSwitch], **attrs) -> P4ProcessSwitch:
    """A switch node object without Mininet's shell (only its command line is used)."""
    node = cls.__new__(cls)
    node.__dict__.update({"device_id": 3, "grpc_port": 50053, "port_rates": {1: 10.0, 2: 2.5},
                          "queue_depth": 64, "priority_queues": 8, "cpu_port": 255, "pcap_dir": None,
                          "clock": "123:2.0", "rt_priority": 10, **attrs})
    node.data_ports = lambda: {1: "b0l2-eth1", 2: "b0l2-eth2"}
    return node


def test_switch_command_lines():
    p4sim = _node(P4SimSwitch).command()
    assert p4sim[1:4] == ["-m", "p4sim.cli", "switch"]
    joined = " ".join(p4sim)
    for part in ("-i 1@b0l2-eth1 -i 2@b0l2-eth2", "--device-id 3", "--grpc-server-addr 127.0.0.1:50053",
                 "--priority-queues 8", "--cpu-port 255", "--port-rate 1=10 --port-rate 2=2.5", "--no-p4",
                 "--clock 123:2.0"):
        assert part in joined
    assert realtime_prefix(10) == ["chrt", "-r", "10"] and realtime_prefix(0) == []
    assert (agent_priority(10), agent_priority(1), agent_priority(0)) == (9, 1, 0)
    bmv2 = _node(BMv2Switch, pcap_dir="/tmp/p").command()
    assert bmv2[0] == "simple_switch_grpc" and "--no-p4" in bmv2
    target = bmv2[bmv2.index("--") + 1:]   # simple_switch_grpc's target options follow "--"
    assert target == ["--grpc-server-addr", "127.0.0.1:50053", "--priority-queues", "8", "--cpu-port", "255"]
    assert "--pcap" in bmv2[:bmv2.index("--")]
