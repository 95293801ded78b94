"""Mininet switch nodes that run a P4 switch process: p4sim's, or BMv2's
``simple_switch_grpc`` -- like the P4 tutorials' ``P4RuntimeSwitch``.

Both classes take the same constructor arguments (what `topo.mininet_topo` puts in
each switch's options) and differ only in their command line; their base overrides
Mininet's ``start``/``stop`` and batch hooks: ``start`` launches the process on the
switch's interfaces (the switch stays in the root namespace, like the tutorials'
switches; its gRPC port is on 127.0.0.1, or its server's address in cluster mode), `batchStartup` -- which Mininet
calls for all switches of a class after starting them -- waits until every gRPC port
answers, so the processes boot in parallel. ``stop`` ends the process by its PID. The
PID is also written to ``<run_dir>/<name>.pid`` so that `make stop` can find leftovers.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from mininet.node import Switch

from emulation.realtime import realtime_prefix
from p4sim.switch.member import READY
from topo.placement import LOOPBACK
from topo.processes import stop_process
from topo.spec import PfcSpec

ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = ROOT / "build" / "run"
# A p4sim switch answers on gRPC in about a second on an idle core; ten of them share
# two cores at start-up, so allow a generous margin before declaring one dead.
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
# A BMv2 switch's Thrift port is this far from its gRPC port (`thrift_port_of`).
THRIFT_OFFSET = 10000
# Where a p4sim switch runs its packet loop (`p4sim switch --loop-cpu`): every switch
# of the fabric on the last core, where their wake-ups on the emulated clock's grid
# share one timer interrupt and warm caches (measured in docs/fabric.md).
LOOP_CPU = "last"
# Bytes of an Ethernet header, which an interface's MTU does not count.
ETHERNET_HEADER = 14


class SwitchStartError(RuntimeError):
    """A switch process that exited or did not open its gRPC port in time."""


def port_answers(port: int, host: str = "127.0.0.1") -> bool:
    """True once something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class P4ProcessSwitch(Switch):
    """A Mininet switch whose data plane is one external P4 switch process.

    Subclasses give `command()`; everything else (launch, readiness, PID file,
    logs, stop) is shared.
    """

    # Where the P4Runtime server listens: this machine's loopback, or in cluster mode
    # the address of the switch's server (topo.cluster).
    grpc_host = LOOPBACK

    def __init__(self, name: str, *, device_id: int, grpc_port: int,
                 port_rates: dict[int, float] | None = None, queue_depth: int = 64,
                 priority_queues: int = 8, cpu_port: int | None = 255,
                 pcap_dir: str | None = None, run_dir: str | Path = RUN_DIR,
                 clock: str | None = None, rt_priority: int = 0, pfc: PfcSpec | None = None,
                 engine: str = "auto", loop_cpu: str = LOOP_CPU, **params) -> None:
        super().__init__(name, **params)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.port_rates = dict(port_rates or {})
        self.queue_depth = queue_depth
        self.priority_queues = priority_queues
        self.cpu_port = cpu_port
        self.pcap_dir = pcap_dir
        self.run_dir = Path(run_dir)
        self.clock = clock              # the fabric's EmulationClock, encoded
        self.rt_priority = rt_priority  # SCHED_RR priority, 0 = normal scheduling
        self.pfc = pfc                  # lossless priority (None: no PFC)
        self.engine = engine            # p4sim's --engine (BMv2 has one engine)
        self.loop_cpu = loop_cpu        # p4sim's --loop-cpu
        self.process: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    @property
    def pid_path(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    def data_ports(self) -> dict[int, str]:
        """Port number -> interface name of every data-plane interface (not ``lo``)."""
        return {port: intf.name for port, intf in sorted(self.intfs.items()) if intf.name != "lo"}

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers: Sequence = ()) -> None:
        """Launch the switch process (without waiting for it: see `batchStartup`)."""
        self.quiet_ports()
        self.launch()

    def quiet_ports(self) -> None:
        """The root namespace must not speak on the fabric's cables (IPv6 autoconf).
        Written to /proc/sys from here for a switch on this machine: a `sysctl` through
        the node's shell took ~17 ms a switch, 0.17 s of the default fabric's start."""
        ifaces = list(self.data_ports().values())
        if self.inNamespace or getattr(self, "isRemote", False):
            self.cmd("sysctl -qw " + " ".join(f"net.ipv6.conf.{iface}.disable_ipv6=1" for iface in ifaces))
            return
        for iface in ifaces:
            try:
                Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6").write_text("1\n")
            except FileNotFoundError:   # a kernel without IPv6: nothing to quiet
                continue

    def launch(self) -> None:
        """Start `command()` as a child of this process (a switch on another machine
        starts it there instead: `topo.cluster`)."""
        self._spawn(realtime_prefix(self.rt_priority) + self.command())

    def _spawn(self, argv: list[str]) -> None:
        """Run ``argv`` as this node's process, its output in `log_path`, its PID in
        `pid_path`."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            # A session of its own: Ctrl-C at the CLI must not reach the switches.
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.pid_path.write_text(f"{self.process.pid}\n")

    def exit_status(self) -> int | None:
        """The process's exit status; None while it runs."""
        assert self.process is not None, f"{self.name} was not started"
        return self.process.poll()

    def pids(self) -> list[int]:
        """The processes that run this switch (what its CPU is, what to kill)."""
        return [self.process.pid] if self.process is not None else []

    def ready(self) -> bool:
        """The switch serves: its gRPC port answers."""
        return port_answers(self.grpc_port, self.grpc_host)

    def wait_ready(self, deadline: float) -> None:
        """Block until `ready`; `SwitchStartError` if the process dies or ``deadline``
        (time.monotonic()) passes."""
        while not self.ready():
            status = self.exit_status()
            if status is not None:
                raise SwitchStartError(f"{self.name} exited with status {status} "
                                       f"before opening gRPC port {self.grpc_port}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise SwitchStartError(f"{self.name} did not open gRPC port {self.grpc_port} "
                                       f"within {READY_TIMEOUT_S:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)

    @classmethod
    def batchStartup(cls, switches: Sequence["P4ProcessSwitch"]) -> Sequence["P4ProcessSwitch"]:
        """Mininet's hook after every switch's start(): wait for all of them at once."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        for switch in switches:
            switch.wait_ready(deadline)
        return switches

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal_stop(self) -> None:
        """Ask the process to stop (SIGTERM), without waiting."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    @classmethod
    def batchShutdown(cls, switches: Sequence["P4ProcessSwitch"]) -> Sequence["P4ProcessSwitch"]:
        """Mininet's hook at net.stop(): signal every process first, then reap each,
        so the processes shut down in parallel."""
        for switch in switches:
            switch.signal_stop()
        for switch in switches:
            switch.stop()
        return switches

    def stop(self, deleteIntfs: bool = True) -> None:
        """End the process by PID (SIGTERM, then SIGKILL), then Mininet's cleanup."""
        if self.process is not None:
            self.signal_stop()
            if self.process.poll() is None:
                try:
                    self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self.process = None
            self.pid_path.unlink(missing_ok=True)
        super().stop(deleteIntfs)


class P4SimSwitch(P4ProcessSwitch):
    """Runs ``p4sim switch`` (the project's simple_switch_grpc), with real egress
    queues: line rate per port, queue depth, strict-priority queues."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "p4sim.cli", "switch", *self.switch_args()]

    def switch_args(self) -> list[str]:
        """``p4sim switch``'s arguments for this switch."""
        cmd = []
        for port, iface in self.data_ports().items():
            cmd += ["-i", f"{port}@{iface}"]
        cmd += ["--device-id", str(self.device_id),
                "--grpc-server-addr", f"{self.grpc_host}:{self.grpc_port}",
                "--engine", self.engine, "--loop-cpu", self.loop_cpu,
                "--queue-depth", str(self.queue_depth),
                "--priority-queues", str(self.priority_queues)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        for port, mbps in sorted(self.port_rates.items()):
            cmd += ["--port-rate", f"{port}={mbps:g}"]
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        if self.clock:
            cmd += ["--clock", self.clock]
        if self.pfc is not None:
            cmd += ["--pfc", str(self.pfc.priority), "--pfc-xoff", str(self.pfc.xoff),
                    "--pfc-xon", str(self.pfc.xon), "--pfc-headroom", str(self.pfc.headroom),
                    "--pfc-watchdog-ms", f"{self.pfc.watchdog_ms:g}"]
        cmd.append("--no-p4")  # the controller pushes the pipeline over P4Runtime
        return cmd


class P4SimSharedSwitch(P4SimSwitch):
    """A p4sim switch that runs inside one ``p4sim switches`` process -- with one packet
    loop thread -- shared by the fabric's switches (the spec's ``switch_process:
    shared``; p4sim/switch/shared.py), yet with a process of its own: a ``p4sim
    switch-member`` (p4sim/switch/member.py) that brings the switch's arguments over
    the shared process's members socket. The switch runs while its member lives, so
    killing this node's ``process`` kills this switch alone, and `launch` brings it back
    with empty tables, as with a process per switch. The shared process starts with the
    first member of its run directory and ends with the last one stopped."""

    # Run directory -> its shared process and the nodes whose members it runs.
    _shared: dict[Path, tuple[subprocess.Popen, set[str]]] = {}

    @property
    def members_socket(self) -> Path:
        return self.run_dir / "switches.sock"

    @property
    def shared_pid_path(self) -> Path:
        return self.run_dir / "switches.pid"

    def shared_process(self) -> subprocess.Popen | None:
        """The ``p4sim switches`` process this node's switch runs in (None: none runs)."""
        entry = self._shared.get(self.run_dir)
        return entry[0] if entry is not None and entry[0].poll() is None else None

    def pids(self) -> list[int]:
        """The member's PID and the shared process's, which does the switch's work."""
        shared = self.shared_process()
        return super().pids() + ([shared.pid] if shared is not None else [])

    def command(self) -> list[str]:
        return [sys.executable, "-m", "p4sim.cli", "switch-member", "--shared", str(self.members_socket),
                "--", *self.switch_args()]

    def launch(self) -> None:
        """The shared process if none runs yet, then this switch's member (the member
        waits for the shared process's socket)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        shared = self.shared_process()
        if shared is None:
            with open(self.run_dir / "switches.log", "ab") as log:
                shared = subprocess.Popen(realtime_prefix(self.rt_priority) +
                                          [sys.executable, "-m", "p4sim.cli", "switches",
                                           "--members", str(self.members_socket)],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
            self.shared_pid_path.write_text(f"{shared.pid}\n")
            self._shared[self.run_dir] = (shared, set())
        self._shared[self.run_dir][1].add(self.name)
        self._spawn(self.command())   # the member only waits: normal scheduling

    def ready(self) -> bool:
        """The member says its switch runs, and its gRPC port answers."""
        try:
            said = READY in self.log_path.read_text(errors="replace")
        except OSError:
            said = False
        return said and super().ready()

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stop the member (its switch stops before it exits); the last member stopped
        stops the shared process."""
        super().stop(deleteIntfs)
        entry = self._shared.get(self.run_dir)
        if entry is None:
            return
        shared, members = entry
        members.discard(self.name)
        if not members:
            del self._shared[self.run_dir]
            stop_process(shared, STOP_TIMEOUT_S)
            self.shared_pid_path.unlink(missing_ok=True)


class BMv2Switch(P4ProcessSwitch):
    """Runs BMv2's ``simple_switch_grpc`` (when installed), with the spec's queues.

    BMv2 has no start-up flag for line rates or queue depths; its Thrift CLI
    (``simple_switch_CLI``) sets them, so once the switch answers, every data port gets
    ``set_queue_depth`` and ``set_queue_rate`` -- queues then build up as on p4sim and
    astral.p4's ECN marking (from ``enq_qdepth``) can happen. Each switch serves Thrift
    on a port of its own (`thrift_port_of`): simple_switch's default, 9090, would
    make every switch of a fabric but the first fail to start.
    """

    executable = "simple_switch_grpc"
    cli = "simple_switch_CLI"

    @classmethod
    def available(cls) -> bool:
        return shutil.which(cls.executable) is not None

    @property
    def thrift_port(self) -> int:
        return thrift_port_of(self.grpc_port)

    def command(self) -> list[str]:
        cmd = [self.executable]
        for port, iface in self.data_ports().items():
            cmd += ["-i", f"{port}@{iface}"]
        cmd += ["--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port),
                "--log-level", "warn"]
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        cmd.append("--no-p4")
        cmd += ["--", "--grpc-server-addr", f"{self.grpc_host}:{self.grpc_port}",
                "--priority-queues", str(self.priority_queues)]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        return cmd

    def queue_commands(self, frame_bytes: int) -> list[str]:
        """The Thrift CLI commands that give every data port the spec's queue depth and
        line rate. BMv2 limits a queue in packets per second, so the rate is the one at
        which frames of ``frame_bytes`` (a full frame at the interface MTU) fill the line."""
        cmds = []
        for port in sorted(self.data_ports()):
            cmds.append(f"set_queue_depth {self.queue_depth} {port}")
            if port in self.port_rates:
                pps = max(1, round(self.port_rates[port] * 1e6 / (8 * frame_bytes)))
                cmds.append(f"set_queue_rate {pps} {port}")
        return cmds

    def configure_queues(self) -> None:
        """Send `queue_commands` through ``simple_switch_CLI``; `SwitchStartError` with
        the CLI's output when it fails (a fabric without its queues would measure nothing
        of what the spec says)."""
        intf = next(iter(self.data_ports().values()), None)
        mtu = int(Path(f"/sys/class/net/{intf}/mtu").read_text()) if intf else 1500
        script = "\n".join(self.queue_commands(mtu + ETHERNET_HEADER)) + "\n"
        done = subprocess.run([self.cli, "--thrift-port", str(self.thrift_port)], input=script,
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0 or "Error" in done.stdout:
            raise SwitchStartError(f"{self.name}: {self.cli} on Thrift port {self.thrift_port} failed:\n"
                                   f"{done.stdout}{done.stderr}")

    def start(self, controllers: Sequence = ()) -> None:
        """Refuse a Thrift port something else already serves (another fabric's
        switch), then launch as every node does."""
        if port_answers(self.thrift_port):
            raise SwitchStartError(f"{self.name}: Thrift port {self.thrift_port} is already in use")
        if self.pfc is not None:
            raise SwitchStartError(f"{self.name}: simple_switch has no priority flow control: "
                                   f"run the p4sim backend or set pfc.enabled: false in the spec")
        super().start(controllers)

    @classmethod
    def batchStartup(cls, switches: Sequence["P4ProcessSwitch"]) -> Sequence["P4ProcessSwitch"]:
        """Wait for every switch's gRPC port, then set each one's queues."""
        super().batchStartup(switches)
        for switch in switches:
            assert isinstance(switch, BMv2Switch)
            switch.configure_queues()
        return switches


def thrift_port_of(grpc_port: int) -> int:
    """A BMv2 switch's Thrift port: its gRPC port + THRIFT_OFFSET, or - THRIFT_OFFSET
    when that would pass 65535. Distinct gRPC ports give distinct Thrift ports, and a
    fabric's two ranges stay apart (a fabric has far fewer than THRIFT_OFFSET switches)."""
    up = grpc_port + THRIFT_OFFSET
    return up if up <= 65535 else grpc_port - THRIFT_OFFSET


BACKENDS: dict[str, type[P4ProcessSwitch]] = {"p4sim": P4SimSwitch, "bmv2": BMv2Switch}
