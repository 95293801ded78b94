"""A ``p4sim switch`` on real ports, programmed over P4Runtime: the whole device.

The switch runs in its own network namespace with ports 1 and 2 on veths to two host
namespaces and the CPU port 64; the controller (this test) reaches its gRPC server over
a Unix socket. The program is the runtime tests' fixture (tests/runtime_fixtures):
table entries written over P4Runtime forward packets between the hosts, an ACL sends
packets to the CPU (PacketIn), a PacketOut leaves on a port, and a digest arrives.
"""

from __future__ import annotations

import os

import grpc
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4sim.proto import p4r, p4r_grpc
from runtime_fixtures.harness import CPU_PORT, DEVICE_ID, Stream, load_device_config, load_p4info
from test_switch_device_net import net, recv_until, start_switch  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

ELECTION = p4r.Uint128(low=1)
H2_MAC = "02:00:00:00:02:02"


def b(value: int, width_bits: int) -> bytes:
    return value.to_bytes((width_bits + 7) // 8, "big")


def ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


class Controller:
    """The primary controller of the switch, with P4Info lookups by name."""

    def __init__(self, address: str) -> None:
        self.p4info = load_p4info()
        self.channel = grpc.insecure_channel(address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.stream = Stream(self.stub)
        update = self.stream.arbitrate(ELECTION.low)
        assert update.status.code == 0, update
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, election_id=ELECTION,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=self.p4info,
                                                p4_device_config=load_device_config())))

    def id(self, kind: str, name: str) -> int:
        return next(o.preamble.id for o in getattr(self.p4info, kind) if o.preamble.name == name)

    def insert(self, entity: p4r.Entity) -> None:
        self.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=ELECTION, updates=[
            p4r.Update(type=p4r.Update.INSERT, entity=entity)]))

    def close(self) -> None:
        self.stream.close()
        self.channel.close()


@pytest.fixture
def controlled(net, tmp_path):
    address = f"unix:{tmp_path}/p4rt.sock"
    # Target options after "--", the way simple_switch_grpc is started.
    sw = start_switch(net, tmp_path, "--no-p4", "--device-id", str(DEVICE_ID),
                      "--", "--cpu-port", str(CPU_PORT), "--grpc-server-addr", address)
    ctl = None
    try:
        ctl = Controller(address)
        yield sw, ctl
    finally:
        if ctl is not None:
            ctl.close()
        sw.stop()


def to_h2(ttl: int = 64, src: str = "10.0.1.1") -> bytes:
    return bytes(Ether(src="02:00:00:00:01:01", dst="02:00:00:00:00:99")
                 / IP(src=src, dst="10.0.2.2", ttl=ttl) / UDP(sport=5, dport=4791) / Raw(b"x" * 30))


def test_table_entries_forward_between_hosts(net, controlled):
    _, ctl = controlled
    ctl.insert(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=ctl.id("tables", "MyIngress.ipv4_lpm"),
        match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=b(ip("10.0.2.0"), 32),
                                                                  prefix_len=24))],
        action=p4r.TableAction(action=p4r.Action(action_id=ctl.id("actions", "MyIngress.set_nhop"), params=[
            p4r.Action.Param(param_id=1, value=b(mac(H2_MAC), 48)),
            p4r.Action.Param(param_id=2, value=b(2, 9))])))))
    rx = net.socket("h2", net.ifaces["h2"])
    tx = net.socket("h1", net.ifaces["h1"])
    tx.send(to_h2())
    got = recv_until(rx, 1, timeout=10)
    assert len(got) == 1
    out = Ether(got[0][1])
    # The UDP payload is compared as bytes: once scapy's RoCE layer is imported anywhere
    # in the session, it decodes UDP port 4791 as BTH and Raw would be shorter.
    assert out.dst == H2_MAC and out[IP].ttl == 63 and bytes(out[UDP].payload) == b"x" * 30


def test_packet_in_and_packet_out_through_real_ports(net, controlled):
    _, ctl = controlled
    ctl.insert(p4r.Entity(table_entry=p4r.TableEntry(
        table_id=ctl.id("tables", "MyIngress.acl"), priority=10,
        match=[p4r.FieldMatch(field_id=1, ternary=p4r.FieldMatch.Ternary(
            value=b(ip("10.0.1.7"), 32), mask=b(0xFFFFFFFF, 32)))],
        action=p4r.TableAction(action=p4r.Action(action_id=ctl.id("actions", "MyIngress.send_to_cpu"))))))
    tx = net.socket("h1", net.ifaces["h1"])
    frame = to_h2(src="10.0.1.7")
    tx.send(frame)
    msg = ctl.stream.recv(timeout=10)
    assert msg.WhichOneof("update") == "packet"
    assert msg.packet.payload == frame
    assert [(m.metadata_id, int.from_bytes(m.value, "big")) for m in msg.packet.metadata
            if m.metadata_id == 1] == [(1, 1)]  # ingress_port

    rx = net.socket("h2", net.ifaces["h2"])
    out = to_h2(src="10.0.9.9")
    ctl.stream.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(
        payload=out, metadata=[p4r.PacketMetadata(metadata_id=1, value=b(2, 9))])))
    got = recv_until(rx, 1, timeout=10)
    assert len(got) == 1 and got[0][1] == out


def test_digest_is_delivered(net, controlled):
    _, ctl = controlled
    digest_id = ctl.id("digests", "learn_t")
    ctl.insert(p4r.Entity(digest_entry=p4r.DigestEntry(
        digest_id=digest_id, config=p4r.DigestEntry.Config(max_timeout_ns=0, max_list_size=1,
                                                           ack_timeout_ns=10**9))))
    tx = net.socket("h1", net.ifaces["h1"])
    tx.send(to_h2(ttl=1))
    msg = ctl.stream.recv(timeout=10)
    assert msg.WhichOneof("update") == "digest" and msg.digest.digest_id == digest_id
    (data,) = msg.digest.data
    src_mac, port = (m.bitstring for m in data.struct.members)
    assert int.from_bytes(src_mac, "big") == mac("02:00:00:00:01:01")
    assert int.from_bytes(port, "big") == 1


def test_ports_oper_status_is_reported_from_the_switchs_namespace(net, controlled):
    """QueueControl GetPortStatus: each port's oper status as the switch process sees its
    interfaces (in its own namespace, where this process's /sys shows nothing). A cable
    whose far end goes down takes the port's carrier (not the port's own admin state)
    with it; the port comes back with the far end."""
    from p4sim.runtime.queues import QueueControlClient
    from testkit import wait_for

    _, ctl = controlled
    client = QueueControlClient(ctl.channel)
    assert client.port_status() == {1: True, 2: True}
    assert not os.path.exists(f"/sys/class/net/{net.ifaces['s1']}")   # not in this namespace
    net.run("h1", "ip", "link", "set", net.ifaces["h1"], "down")
    wait_for("port 1 reported down", lambda: client.port_status() == {1: False, 2: True}, 5)
    net.run("h1", "ip", "link", "set", net.ifaces["h1"], "up")
    wait_for("port 1 reported up again", lambda: client.port_status() == {1: True, 2: True}, 5)
