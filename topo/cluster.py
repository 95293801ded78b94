"""A fabric over several machines, on Mininet's own cluster mode (spec key ``cluster``).

``ClusterFabric(spec)`` is a `topo.net.Fabric` whose network is a
`mininet.examples.cluster.MininetCluster`: hosts are ``RemoteHost``s, p4sim switches
are remote nodes too (`ClusterP4SimSwitch`: Mininet's ``RemoteMixin`` on our switch
node class), placement is `BlockPlacer` (whole blocks per machine, `topo.placement`),
and the cables between machines -- leaf-spine only -- are Mininet's ``RemoteGRELink``
(gretap tunnels between the servers) or ``RemoteSSHLink`` (tap devices joined by
``ssh -w``). Everything else (compile, MTU, host configuration, programming, stop) is
the one-machine fabric's.

What Mininet's cluster mode needs from each server, and what this module adds:

* root over ssh without a password from this machine (and between servers for SSH
  links), ``sudo``, Mininet's ``mnexec``: Mininet's own requirements. ``ssh_config``
  (``ssh -F``) is given to every ssh Mininet runs from here.
* this repository and its venv at the same path as here (`ROOT`, ``sys.executable``):
  the switches and agents are started there by path. The agents' run directory (job
  file, start barrier, results) must be shared by the machines at the same path.
* one emulation clock: each machine's CLOCK_MONOTONIC offset from this one's is
  measured over ssh at start (`emulation.clocksync`), and every switch and agent gets
  the fabric's clock shifted by its machine's offset, with the same dilation.

Every ssh Mininet runs for a node (its shell, its root-namespace commands, the outer
ssh of an SSH link) goes over one connection per server: OpenSSH multiplexing
(Mininet's ``controlPath``), its sockets in a directory of the fabric's own that `stop`
closes (``ssh -O exit``) and removes; a fresh ssh per node cost each a handshake (about
0.3 s here, sixteen of them per fabric in the cluster test).

Before building, every server is probed over ssh (reachable, ``sudo``, the repo's
python there) and, for GRE links, asked to create a gretap device in a throwaway
namespace, so a missing piece is a `FabricError` naming the spec key and server
instead of Mininet's ``sys.exit`` halfway through.
"""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from mininet.examples.cluster import (MininetCluster, Placer, RemoteGRELink, RemoteHost,
                                      RemoteMixin, RemoteSSHLink)
from mininet.net import Mininet

from emulation import clocksync
from emulation.clock import EmulationClock
from emulation.realtime import realtime_prefix
from topo.mininet_topo import FabricTopo
from topo.net import Fabric, FabricError, ProgramStep
from topo.nodes import ROOT, RUN_DIR, STOP_TIMEOUT_S, P4SimSwitch
from topo.placement import LOCALHOST, servers_of
from topo.spec import ClusterSpec, FabricSpec

# The spec's ``cluster.link`` -> Mininet's link class for cables between servers.
LINKS: dict[str, type] = {"gre": RemoteGRELink, "ssh": RemoteSSHLink}
PROBE_TIMEOUT_S = 30.0
# Seconds ssh may take to connect before a server counts as unreachable.
CONNECT_TIMEOUT_S = 10
# How often (s) a stopping switch is checked for having exited.
STOP_POLL_S = 0.05
# The ssh connection of each server for every node there (ssh expands %C: a hash of the
# user, server and port). The directory is made under /tmp: a Unix socket's path has at
# most 107 characters, which a run directory under a test's tmp_path may not leave.
CONTROL_SOCKET = "%C"


def ssh_options(cluster: ClusterSpec) -> list[str]:
    """Options every ssh to a server gets: ``-F <cluster.ssh_config>`` when set."""
    if not cluster.ssh_config:
        return []
    path = Path(cluster.ssh_config).expanduser()
    if not path.is_file():
        raise FabricError(f"cluster.ssh_config: no such file: {path}")
    return ["-F", str(path.resolve())]


def ssh_command(server: str, options: Sequence[str], *remote: str) -> list[str]:
    """``ssh`` to ``server`` as root, never asking for a password, running ``remote``
    (words quoted for the server's shell)."""
    return ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", *options,
            f"root@{server}", *map(shlex.quote, remote)]


def close_connection(server: str, options: Sequence[str], control_path: str) -> None:
    """End the multiplexing connection to ``server`` (``ssh -O exit``) if one is open,
    and wait for its master process to exit, so nothing of it is left on the server."""
    base = ["ssh", *options, "-o", f"ControlPath={control_path}", f"root@{server}"]
    check = [*base[:-1], "-O", "check", base[-1]]
    if subprocess.run(check, capture_output=True, timeout=PROBE_TIMEOUT_S).returncode != 0:
        return          # no master (never opened, or already gone)
    subprocess.run([*base[:-1], "-O", "exit", base[-1]], capture_output=True, timeout=PROBE_TIMEOUT_S)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while subprocess.run(check, capture_output=True, timeout=PROBE_TIMEOUT_S).returncode == 0:
        if time.monotonic() > deadline:
            raise FabricError(f"cluster.servers: {server}: the ssh connection did not close "
                              f"within {STOP_TIMEOUT_S:.0f} s of ssh -O exit")
        time.sleep(STOP_POLL_S)


def measure_offset(server: str, options: Sequence[str]) -> clocksync.Offset:
    """``server``'s CLOCK_MONOTONIC minus ours; also proves ssh, sudo and this repo's
    python work there (`FabricError` naming the server otherwise)."""
    if server == LOCALHOST:
        return clocksync.Offset(0, 0)
    cmd = ssh_command(server, options, "sudo", "-n", "sh", "-c", 'cd "$0" && exec "$1" -u -c "$2"',
                      str(ROOT), sys.executable, clocksync.PROBE)
    probe = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    assert probe.stdin is not None and probe.stdout is not None

    def ask() -> int:
        probe.stdin.write("\n")
        probe.stdin.flush()
        return int(probe.stdout.readline())

    try:
        return clocksync.measure(ask)
    except (ValueError, OSError):
        probe.kill()
        _, err = probe.communicate(timeout=PROBE_TIMEOUT_S)
        raise FabricError(f"cluster.servers: {server}: cannot run this repository's python "
                          f"({sys.executable} in {ROOT}) there as root over ssh with sudo: "
                          f"{err.strip() or 'no answer'}") from None
    finally:
        if probe.poll() is None:
            probe.stdin.close()
            probe.wait(PROBE_TIMEOUT_S)


def check_gre(server: str, options: Sequence[str]) -> None:
    """`FabricError` unless ``server`` can create a gretap device (tried in a
    throwaway network namespace, so nothing of the server's is touched)."""
    script = "ip link add astgre type gretap local 192.0.2.1 remote 192.0.2.2 ttl 64 key 1"
    cmd = ["unshare", "--net", "sh", "-c", script]
    if server != LOCALHOST:
        cmd = ssh_command(server, options, "sudo", "-n", *cmd)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    if done.returncode != 0:
        raise FabricError(f"cluster.link: gre: {server} cannot create GRE tunnels ({script}: "
                          f"{(done.stderr or done.stdout).strip()}); the kernel needs ip_gre "
                          f"(CONFIG_NET_IPGRE); or use cluster.link: ssh (Mininet's RemoteSSHLink)")


class BlockPlacer(Placer):
    """Mininet cluster placement from `topo.addressing.AddressPlan.node_servers`: whole blocks per
    server. ``assignment`` maps node name -> server."""

    def __init__(self, *args: Any, assignment: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assignment = dict(assignment)

    def place(self, node: str) -> str:
        return self.assignment[node]


class SshOptionsMixin:
    """Put ``ssh_options`` into every ssh a remote node runs (Mininet's ``sshbase``), and
    start every process of a node without a Python ``preexec_fn``.

    Mininet's RemoteMixin puts each process it starts in a process group of its own with
    ``preexec_fn=os.setpgrp``, which makes subprocess fork() the whole launcher: gRPC's
    fork handlers then run in the child and may print into the node's shell before the
    exec ("Epoll1Poller ... epoll_wait error: Bad file descriptor", 8 of 300 such children
    beside a live gRPC server, none with ``process_group=0``). Mininet read that as the
    output of an ``ip link`` and failed the cluster's build ("error creating tap9",
    twice in fresh-clone CI runs). ``process_group=0`` makes the same group in C, on
    subprocess's vfork path, where no fork handler runs."""

    _ignoreSignal = None            # RemoteMixin's preexec_fn

    def __init__(self, name: str, *, ssh_options: Sequence[str] = (), **params: Any) -> None:
        self.sshbase = [*RemoteMixin.sshbase, *ssh_options]
        super().__init__(name, **params)

    def _popen(self, cmd: Any, *args: Any, **params: Any) -> subprocess.Popen:
        params.setdefault("process_group", 0)
        return super()._popen(cmd, *args, **params)  # type: ignore[misc]


class ClusterHost(SshOptionsMixin, RemoteHost):
    """A server's Mininet host on its machine.

    ``popen`` of a remote host goes through ssh, which hands the server's shell one
    line: every word is quoted, and ``cwd`` applies there (the agents run ``python -m``
    from the repository). On stop every process left in the host's namespace (an agent
    that outlived its ssh) is ended by PID before Mininet ends the host's shell.
    """

    def popen(self, *args: Any, cwd: str | None = None, **kwargs: Any) -> subprocess.Popen:
        if not self.isRemote:
            return super().popen(*args, cwd=cwd, **kwargs)
        if len(args) == 1 and isinstance(args[0], str):
            argv = shlex.split(args[0])
        else:
            argv = list(args[0]) if len(args) == 1 else list(args)
        if cwd is not None:
            argv = ["sh", "-c", 'cd "$0" && exec "$@"', cwd, *argv]
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return super().popen([shlex.quote(str(word)) for word in argv], **kwargs)

    def terminate(self) -> None:
        if self.shell is not None and self.shell.poll() is None:
            self.cmd(_END_NAMESPACE_PEERS)
        super().terminate()


# Run in a host's shell: SIGKILL every other process in the shell's network namespace.
_END_NAMESPACE_PEERS = ('me=$(readlink /proc/$$/ns/net); for p in /proc/[0-9]*; do '
                        'pid=${p#/proc/}; [ "$pid" != "$$" ] && '
                        '[ "$(readlink $p/ns/net 2>/dev/null)" = "$me" ] && kill -9 "$pid" 2>/dev/null; '
                        'done; true')


class ClusterP4SimSwitch(SshOptionsMixin, RemoteMixin, P4SimSwitch):
    """A p4sim switch on its server: the process is started from the node's shell there
    (its PID read back with ``echo $!`` and written to the PID file on the server, for
    `make stop` there after a crash), serves P4Runtime on the server's address, and
    reads the fabric's clock shifted by its server's offset (``clock_offsets``: server
    -> ns)."""

    def __init__(self, name: str, *, clock_offsets: Mapping[str, int] | None = None, **params: Any) -> None:
        super().__init__(name, **params)
        if self.isRemote:
            self.grpc_host = self.serverIP
        if self.clock:
            offset = (clock_offsets or {}).get(self.server, 0)
            self.clock = EmulationClock.decode(self.clock, "clock").shifted(offset).encode()
        self.remote_pid: int | None = None

    def launch(self) -> None:
        argv = shlex.join(realtime_prefix(self.rt_priority) + self.command())
        log, run_dir = shlex.quote(str(self.log_path)), shlex.quote(str(self.run_dir))
        out = self.cmd(f"mkdir -p {run_dir} && cd {shlex.quote(str(ROOT))} && "
                       f"{{ {argv} >{log} 2>&1 </dev/null & }} && "
                       f"echo $! >{shlex.quote(str(self.pid_path))} && echo $!")
        try:
            self.remote_pid = int(out.split()[-1])
        except (IndexError, ValueError):
            raise FabricError(f"{self.name}: starting the switch on {self.server} failed: {out.strip()}") from None

    def exit_status(self) -> int | None:
        assert self.remote_pid is not None, f"{self.name} was not started"
        out = self.cmd(f"if kill -0 {self.remote_pid} 2>/dev/null; then echo running; "
                       f"else wait {self.remote_pid} 2>/dev/null; echo $?; fi").split()
        if out[-1:] == ["running"]:
            return None
        return int(out[-1]) if out and out[-1].isdigit() else -1   # -1: the node's shell is gone

    def log_tail(self, lines: int = 15) -> str:
        return self.cmd(f"tail -n {lines} {shlex.quote(str(self.log_path))} 2>&1").strip() or "(no log)"

    def signal_stop(self) -> None:
        if self.remote_pid is not None:
            self.cmd(f"kill -TERM {self.remote_pid} 2>/dev/null")

    def stop(self, deleteIntfs: bool = True) -> None:
        """End the process by its PID on the server (SIGTERM, then SIGKILL)."""
        if self.remote_pid is not None and self.shell is not None:
            self.signal_stop()
            self.cmd(f"for i in $(seq {int(STOP_TIMEOUT_S / STOP_POLL_S)}); do "
                     f"kill -0 {self.remote_pid} 2>/dev/null || break; sleep {STOP_POLL_S}; done; "
                     f"kill -KILL {self.remote_pid} 2>/dev/null; wait {self.remote_pid} 2>/dev/null; "
                     f"rm -f {shlex.quote(str(self.pid_path))}")
        self.remote_pid = None
        super().stop(deleteIntfs)


class ClusterNet(MininetCluster):
    """Mininet's cluster network, its pre-flight ssh with ``ssh_options`` too."""

    def __init__(self, *args: Any, ssh_options: Sequence[str] = (), **kwargs: Any) -> None:
        self.sshcmd = [*MininetCluster.sshcmd, *ssh_options]
        super().__init__(*args, **kwargs)


class ClusterFabric(Fabric):
    """A `Fabric` over the machines of ``spec.cluster`` (see the module docstring)."""

    spans_machines = True

    def __init__(self, spec: FabricSpec, backend: str = "p4sim", run_dir: Path = RUN_DIR,
                 program: ProgramStep | None = None) -> None:
        if spec.cluster is None:
            raise FabricError("cluster: the spec has no cluster section (the servers to run on)")
        if backend != "p4sim":
            raise FabricError(f"cluster: backend {backend} cannot run on remote servers: only p4sim "
                              f"(BMv2's queues are set through its Thrift CLI on this machine)")
        super().__init__(spec, backend, run_dir, program)
        self.placement = self.plan.node_servers()
        # Each server's CLOCK_MONOTONIC minus this machine's, measured at start.
        self.offsets: dict[str, clocksync.Offset] = {}
        # The directory of the servers' ssh control sockets, while the network exists.
        self.control_dir: Path | None = None

    def _network(self, switch_options: dict[str, Any]) -> Mininet:
        cluster = self.spec.cluster
        assert cluster is not None
        options = ssh_options(cluster)
        servers = servers_of(self.spec)
        self.offsets = {server: measure_offset(server, options) for server in servers}
        if cluster.link == "gre":
            for server in servers:
                check_gre(server, options)
        self.control_dir = Path(tempfile.mkdtemp(prefix="astral-ssh-"))
        control = str(self.control_dir / CONTROL_SOCKET)
        switch = functools.partial(ClusterP4SimSwitch, ssh_options=options, controlPath=control,
                                   clock_offsets={s: o.ns for s, o in self.offsets.items()}, **switch_options)
        host = functools.partial(ClusterHost, ssh_options=options, controlPath=control)
        return ClusterNet(topo=FabricTopo(plan=self.plan), servers=list(servers),
                          placement=functools.partial(BlockPlacer, assignment=self.placement),
                          link=LINKS[cluster.link], host=host,
                          switch=switch, ssh_options=options, controller=None, build=False,
                          autoSetMacs=False, autoStaticArp=False)

    def clock_on(self, node: str) -> EmulationClock:
        clock = super().clock_on(node)
        return clock.shifted(self.offsets[self.placement[node]].ns)

    def stop(self) -> None:
        """The one-machine stop, then each server's ssh connection closed (safe to call twice)."""
        try:
            super().stop()
        finally:
            control_dir, self.control_dir = self.control_dir, None
            if control_dir is not None:
                assert self.spec.cluster is not None
                options = ssh_options(self.spec.cluster)
                try:
                    for server in servers_of(self.spec):
                        if server != LOCALHOST:
                            close_connection(server, options, str(control_dir / CONTROL_SOCKET))
                finally:
                    shutil.rmtree(control_dir, ignore_errors=True)


def fabric_for(spec: FabricSpec, **kwargs: Any) -> Fabric:
    """The fabric of ``spec``: over its cluster's machines, or on this one."""
    return (ClusterFabric if spec.cluster is not None else Fabric)(spec, **kwargs)
