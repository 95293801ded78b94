"""Bring a fabric up and down: Mininet network, switch processes, hosts.

``Fabric(spec, program=...)`` is a context manager: entering compiles the program (or
reuses the last build), builds the Mininet network from `FabricTopo`, starts the switch
processes and waits for their gRPC ports, configures the hosts (addresses, routes,
static neighbour entries) and runs the programming step it was given; leaving -- also
on an exception or Ctrl-C -- stops everything it started, processes by PID.

What the switches hold is not the fabric's business: ``program(plan, pipeline)`` is
whatever fills them (`controller.routes.program_fabric` writes the routes once and
disconnects). Without one the switches start empty, for a controller that programs
each switch as it connects (GOR, `testbed.run`): a switch is then programmed once.

Host configuration: every NIC has its /32 and reaches the fabric through its rail
gateway (the leaf, a static neighbour entry with the leaf's MAC). The main table sends
each rail's 10.<rail>.0.0/16 out of that rail's NIC; a policy rule per NIC (``from
<nic ip> lookup 100+rail``) sends traffic sourced from a NIC out of that NIC, so a NIC
reaches NICs of other rails too (``ping -I 10.0.0.1 10.1.1.2`` crosses a spine).
"""

from __future__ import annotations

import functools
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from mininet.net import Mininet
from mininet.node import Host

from emulation.clock import EmulationClock
from topo.addressing import AddressPlan, Server
from topo.cables import CableNet, cut_cables
from topo.dilation import dilation_for
from topo.ipbatch import first_refusal, ip_batch, shell_batches
from topo.mininet_topo import FabricTopo
from topo.nodes import BACKENDS, RUN_DIR, BMv2Switch, P4ProcessSwitch, P4SimSharedSwitch
from topo.pipeline import Pipeline, build_pipeline
from topo.spec import FabricSpec, switch_process_of

# Policy-routing tables of the rails: table RAIL_TABLE_BASE + rail.
RAIL_TABLE_BASE = 100

# A programming step: fills the started switches of a plan with the compiled pipeline.
ProgramStep = Callable[[AddressPlan, Pipeline], None]


class FabricError(RuntimeError):
    """The fabric could not be brought up; the message says which step and node."""


def host_commands(plan: AddressPlan, server: Server) -> list[str]:
    """Shell commands that configure one server's namespace: addresses, routes, policy
    rules and the static neighbour entry of each rail gateway."""
    sysctls = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
               "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"]
    # The switch forwards frames as received; segmentation offload would hand it
    # super-MTU TCP frames (as the P4 tutorials' hosts, turn it off).
    offloads = [f"ethtool -K {nic.intf} tso off gso off gro off >/dev/null 2>&1 || true" for nic in server.nics]
    lines = []
    for nic in server.nics:
        leaf_mac = plan.switch(nic.leaf).mac
        table = RAIL_TABLE_BASE + nic.rail
        sysctls.append(f"net.ipv4.conf.{nic.intf}.rp_filter=0")
        lines += [
            f"addr replace {nic.ip}/32 dev {nic.intf}",
            f"neigh replace {nic.gateway_ip} lladdr {leaf_mac} dev {nic.intf} nud permanent",
            f"route replace {nic.gateway_ip}/32 dev {nic.intf} scope link",
            f"route replace {plan.rail_subnet(nic.rail)} via {nic.gateway_ip} dev {nic.intf}",
            f"route replace {nic.gateway_ip}/32 dev {nic.intf} scope link table {table}",
            f"route replace 10.0.0.0/8 via {nic.gateway_ip} dev {nic.intf} table {table}",
            f"rule add from {nic.ip} lookup {table} pref {1000 + nic.rail}",
        ]
    return ["sysctl -qw " + " ".join(sysctls), *offloads, *ip_batch(lines)]


class Fabric:
    """One running fabric (see the module docstring)."""

    def __init__(self, spec: FabricSpec, backend: str = "p4sim", run_dir: Path = RUN_DIR,
                 program: ProgramStep | None = None) -> None:
        if backend not in BACKENDS:
            raise FabricError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
        if backend == "bmv2" and not (BMv2Switch.available() and shutil.which("p4c")):
            raise FabricError(f"backend bmv2 needs {BMv2Switch.executable} and p4c on PATH")
        if spec.cluster is not None and not self.spans_machines:
            raise FabricError(f"cluster: fabric {spec.name!r} runs over {', '.join(spec.cluster.servers)}: "
                              f"bring it up with topo.cluster.fabric_for (make run)")
        self.spec = spec
        self.plan = AddressPlan(spec)
        self.backend = backend
        self.run_dir = Path(run_dir)
        self.program = program
        self.net: Mininet | None = None
        self.pipeline: Pipeline | None = None
        self.timings: dict[str, float] = {}
        # The fabric's one emulation clock; made at start, when the dilation is known.
        self.clock: EmulationClock | None = None

    # A fabric on this machine only; topo.cluster.ClusterFabric spans several.
    spans_machines = False

    @property
    def pcap_dir(self) -> Path | None:
        return self.run_dir / "pcap" if self.spec.pcap else None

    def start(self) -> None:
        """Compile, build, start, configure and program (when given a step); on any
        failure everything started so far is stopped before the error propagates."""
        started = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.timings["total_s"] = time.monotonic() - started

    def _step(self, name: str, fn: Any, *args: Any) -> Any:
        t = time.monotonic()
        result = fn(*args)
        self.timings[f"{name}_s"] = time.monotonic() - t
        return result

    def _start(self) -> None:
        compiler = "p4c" if self.backend == "bmv2" else "p4sim"
        self.pipeline = self._step("compile", build_pipeline, self.spec, Path(RUN_DIR).parent / "pipeline",
                                   compiler)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        # dilation 0 is the spec's "auto": calibrated on this machine (topo/dilation.py).
        self.clock = EmulationClock.start(self.spec.dilation or dilation_for(self.spec))
        self.net = self._network(dict(run_dir=self.run_dir,
                                      pcap_dir=str(self.pcap_dir) if self.pcap_dir else None,
                                      clock=self.clock.encode(), rt_priority=self.spec.rt_priority))
        self._step("build", self.net.build)
        self._step("mtu", self._set_mtu)
        self._step("switches", self.net.start)
        self._step("hosts", self._configure_hosts)
        if self.program is not None:
            self._step("program", self.program, self.plan, self.pipeline)

    def _network(self, switch_options: dict[str, Any]) -> Mininet:
        """The fabric's Mininet network, not built yet; its switches get
        ``switch_options`` (cluster mode builds a MininetCluster instead: topo.cluster)."""
        switch_cls = functools.partial(self.switch_class(), **switch_options)
        return CableNet(topo=FabricTopo(plan=self.plan), switch=switch_cls, host=Host,
                        controller=None, build=False, autoSetMacs=False, autoStaticArp=False)

    def switch_class(self) -> type[P4ProcessSwitch]:
        """The backend's switch node class; p4sim's shared one when ``switch_process``
        is shared (auto: for native switches on one machine, `switch_process_of`)."""
        if self.backend == "p4sim" and switch_process_of(self.spec) == "shared":
            return P4SimSharedSwitch
        return BACKENDS[self.backend]

    def clock_on(self, node: str) -> EmulationClock:
        """The fabric's clock as the machine running ``node`` reads it (on one machine:
        `clock` itself; across machines each has its own CLOCK_MONOTONIC: topo.cluster)."""
        assert self.clock is not None, "fabric not started"
        return self.clock

    def _set_mtu(self) -> None:
        """Every cable's two interfaces get the spec's interface MTU (jumbo frames for
        RoCE path MTU 4096) and come up, before any switch opens its ports (a one-machine
        fabric's cables are laid down: topo.cables)."""
        assert self.net is not None
        mtu = self.spec.iface_mtu
        # One `ip -batch` per node (a host's namespace, or a switch's), not an `ip` per
        # interface: 14 processes instead of 64 for the default fabric.
        by_node: dict[Any, list[str]] = {}
        for link in self.net.links:
            for intf in (link.intf1, link.intf2):
                by_node.setdefault(intf.node, []).append(intf.name)
        for node, names in by_node.items():
            refused = first_refusal(node, ip_batch([f"link set dev {name} mtu {mtu} up" for name in names]))
            if refused is not None:
                raise FabricError(f"setting MTU {mtu} on {node.name}'s interfaces failed: {refused[0]}\n"
                                  f"in: {refused[1]}")

    def _configure_hosts(self) -> None:
        assert self.net is not None
        for server in self.plan.servers:
            host = self.net.get(server.name)
            for nic in server.nics:
                # Mininet's setIP goes through ifconfig, which mangles a /32; the address
                # is set with `ip` below and only recorded here for Mininet's CLI (pingall).
                intf = host.intf(nic.intf)
                intf.ip, intf.prefixLen = nic.ip, 32
            lines = ["; ".join(batch) for batch in shell_batches(host_commands(self.plan, server))]
            refused = first_refusal(host, lines)
            if refused is not None:
                raise FabricError(f"configuring host {server.name} failed:\n{refused[0]}\nin: {refused[1]}")

    def host(self, name: str) -> Host:
        """The Mininet host of server ``name``."""
        assert self.net is not None, "fabric not started"
        return self.net.get(name)

    def stop(self) -> None:
        """Stop the network and every switch process (by PID); safe to call twice."""
        net, self.net = self.net, None
        if net is not None:
            try:
                if not self.spans_machines:
                    cut_cables(net)
            finally:
                net.stop()

    def __enter__(self) -> "Fabric":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
