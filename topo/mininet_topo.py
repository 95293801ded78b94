"""The fabric as a Mininet `Topo`: a pure description (names, ports, MACs, per-switch
options) built from an `AddressPlan`; nothing here starts a process.

One host per server with one interface per rail (``<host>-eth<rail>``, the NIC's MAC, no IP
from Mininet: `topo.net` sets the /32 addresses and routes), every switch with the
options its node class needs (device id, gRPC port, port rates, queue settings).
"""

from __future__ import annotations

from mininet.topo import Topo

from topo.addressing import CPU_PORT, AddressPlan

# Strict-priority egress queues per port: v1model's priority is 3 bits, astral.p4 takes
# it from the DSCP (CNPs at 6), and the traffic manager (BMv2's too) drops priorities
# >= the queue count.
PRIORITY_QUEUES = 8


class FabricTopo(Topo):
    """Leaf/Spine multi-rail fabric of ``plan``."""

    def build(self, plan: AddressPlan) -> None:  # Topo.__init__ calls build(**params)
        spec = plan.spec
        for server in plan.servers:
            # ip=None: Mininet would otherwise put 10.0.0.x/8 on the first interface.
            self.addHost(server.name, ip=None)
        for sw in plan.switches:
            self.addSwitch(sw.name, dpid=f"{sw.switch_id:016x}", device_id=sw.device_id,
                           grpc_port=sw.grpc_port, port_rates=plan.port_rates(sw.name),
                           queue_depth=spec.queue_depth, priority_queues=PRIORITY_QUEUES,
                           cpu_port=CPU_PORT, pfc=spec.pfc if spec.pfc.enabled else None,
                           engine=spec.switch_engine)
        for nic in plan.nics():
            self.addLink(nic.server, nic.leaf, port1=nic.port, port2=nic.leaf_port,
                         intfName1=nic.intf, intfName2=plan.intf(nic.leaf, nic.leaf_port), addr1=nic.mac)
        for link in plan.links:
            if self.isSwitch(link.a) and self.isSwitch(link.b):
                self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port,
                             intfName1=plan.intf(link.a, link.a_port), intfName2=plan.intf(link.b, link.b_port))
