"""The switch nodes' command lines, p4sim and BMv2, and their real-time priorities (no
root needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from emulation.realtime import agent_priority, realtime_prefix
from p4sim.switch.command import UsageError, parse_switch
from p4sim.switch.shared import parse_switches
from topo.nodes import LOOP_CPU, BMv2Switch, P4ProcessSwitch, P4SimSharedSwitch, P4SimSwitch, SwitchStartError
from topo.spec import PfcSpec


def _node(cls: type[P4ProcessSwitch], **attrs) -> P4ProcessSwitch:
    """A switch node object without Mininet's shell (only its command line is used)."""
    node = cls.__new__(cls)
    node.__dict__.update({"name": "b0l2", "device_id": 3, "grpc_port": 50053, "port_rates": {1: 10.0, 2: 2.5},
                          "queue_depth": 64, "priority_queues": 8, "cpu_port": 255, "pcap_dir": None,
                          "clock": "123:2.0", "rt_priority": 10, "pfc": None, "engine": "auto",
                          "loop_cpu": LOOP_CPU, **attrs})
    node.data_ports = lambda: {1: "b0l2-eth1", 2: "b0l2-eth2"}
    return node


def test_switch_command_lines():
    p4sim = _node(P4SimSwitch).command()
    assert p4sim[1:4] == ["-m", "p4sim.cli", "switch"]
    joined = " ".join(p4sim)
    for part in ("-i 1@b0l2-eth1 -i 2@b0l2-eth2", "--device-id 3", "--grpc-server-addr 127.0.0.1:50053",
                 "--priority-queues 8", "--cpu-port 255", "--port-rate 1=10 --port-rate 2=2.5", "--no-p4",
                 "--engine auto", "--loop-cpu last",
                 "--clock 123:2.0"):
        assert part in joined
    assert "--engine python" in " ".join(_node(P4SimSwitch, engine="python").command())
    assert realtime_prefix(10) == ["chrt", "-r", "10"] and realtime_prefix(0) == []
    assert (agent_priority(10), agent_priority(1), agent_priority(0)) == (9, 1, 0)
    bmv2 = _node(BMv2Switch, pcap_dir="/tmp/p").command()
    assert bmv2[0] == "simple_switch_grpc" and "--no-p4" in bmv2
    target = bmv2[bmv2.index("--") + 1:]   # simple_switch_grpc's target options follow "--"
    assert target == ["--grpc-server-addr", "127.0.0.1:50053", "--priority-queues", "8", "--cpu-port", "255"]
    assert "--pcap" in bmv2[:bmv2.index("--")]
    assert "--engine" not in bmv2 and "--loop-cpu" not in bmv2
    assert "--pfc" not in joined


def test_shared_switches_are_member_processes_bringing_each_switch_as_alone():
    """switch_process: shared -- each node runs a `p4sim switch-member` of the run
    directory's shared process, whose switch arguments parse back into that node's own
    `p4sim switch` command line."""
    nodes = [_node(P4SimSharedSwitch, name=f"b0l{k}", device_id=k, grpc_port=50050 + k, run_dir=Path("/r"))
             for k in (1, 2)]
    cmds = [n.command() for n in nodes]
    assert all(c[1:6] == ["-m", "p4sim.cli", "switch-member", "--shared", "/r/switches.sock"] for c in cmds)
    parsed = [parse_switch(c[c.index("--") + 1:]) for c in cmds]
    assert [p.args.device_id for p in parsed] == [1, 2]
    assert [p.args.grpc_server_addr for p in parsed] == ["127.0.0.1:50051", "127.0.0.1:50052"]
    assert all(p.ports == {1: "b0l2-eth1", 2: "b0l2-eth2"} and p.args.no_p4 for p in parsed)
    assert [c[c.index("--") + 1:] for c in cmds] == [P4SimSwitch.command(n)[4:] for n in nodes]


def test_p4sim_switches_refuses_a_switch_with_its_own_log_naming_it():
    with pytest.raises(UsageError, match=r"--switch #2: --log-file is the process's flag"):
        parse_switches(["--no-p4 --device-id 1", "--no-p4 --log-file x.log"])
    with pytest.raises(UsageError, match=r"--switch #1: -i 'eth1': expected PORT@IFACE"):
        parse_switches(["--no-p4 -i eth1"])


def test_pfc_flags_follow_the_spec():
    pfc = PfcSpec(enabled=True, priority=2, xoff=40000, xon=20000, headroom=30000, watchdog_ms=500)
    joined = " ".join(_node(P4SimSwitch, pfc=pfc).command())
    assert "--pfc 2 --pfc-xoff 40000 --pfc-xon 20000 --pfc-headroom 30000 --pfc-watchdog-ms 500" in joined
    with pytest.raises(SwitchStartError, match="no priority flow control"):
        node = _node(BMv2Switch, pfc=pfc)
        node.start()


def test_bmv2_switches_get_thrift_ports_of_their_own():
    """simple_switch serves Thrift on 9090 unless told: every switch of a fabric gets
    its own port, and two fabrics with distinct gRPC ports get distinct Thrift ports."""
    from topo.addressing import AddressPlan
    from topo.nodes import THRIFT_OFFSET, thrift_port_of
    from topo.spec import load_spec

    plan = AddressPlan(load_spec("topo/fabrics/default.yaml"))
    grpc = [sw.grpc_port for sw in plan.switches]
    thrift = [thrift_port_of(p) for p in grpc]
    assert len(set(thrift)) == len(thrift) and not set(thrift) & set(grpc)
    assert thrift[0] == 50051 + THRIFT_OFFSET
    assert thrift_port_of(65530) == 65530 - THRIFT_OFFSET     # never above 65535
    cmd = _node(BMv2Switch).command()
    assert cmd[cmd.index("--thrift-port") + 1] == str(50053 + THRIFT_OFFSET)
    assert cmd.index("--thrift-port") < cmd.index("--")      # a simple_switch option, not a target one


def test_bmv2_queues_from_the_spec_through_simple_switch_cli(tmp_path, monkeypatch):
    """Queue depth and line rate of every data port, as simple_switch_CLI commands
    (BMv2 limits queues in packets per second: a 10 Mbit/s port with 4210-byte frames
    is 297 pps), sent to the switch's own Thrift port."""
    node = _node(BMv2Switch)
    assert node.queue_commands(4210) == [
        "set_queue_depth 64 1", "set_queue_rate 297 1",       # 10e6 / (8 * 4210)
        "set_queue_depth 64 2", "set_queue_rate 74 2",        # 2.5e6 / (8 * 4210)
    ]
    # The CLI as BMv2 installs it, replaced by a script that records what it was given.
    log = tmp_path / "cli.log"
    fake = tmp_path / "simple_switch_CLI"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {log}\ncat >> {log}\necho 'RuntimeCmd: '\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    node.data_ports = lambda: {1: "lo", 2: "lo"}       # an interface whose MTU /sys knows
    node.configure_queues()
    mtu = int(Path("/sys/class/net/lo/mtu").read_text())
    args, *commands = log.read_text().splitlines()
    assert args == f"--thrift-port {50053 + 10000}"
    assert commands == node.queue_commands(mtu + 14)
    fake.write_text("#!/bin/sh\necho 'Error: could not connect to thrift client on port 60053'\nexit 1\n")
    with pytest.raises(SwitchStartError, match="could not connect"):
        node.configure_queues()
