"""Pretend servers of a cluster on this machine: one network namespace per server, each
running its own sshd, for the cluster-mode tests (`tests/test_topo_cluster.py`).

Mininet's cluster mode reaches each server as root over ssh without a password and lets
servers reach each other the same way (its SSH links run ``ssh -w`` from one server to
the other). Here every server is a network namespace on a private LAN (a bridge in a
namespace of its own, addresses from 198.18.0.0/15, the range RFC 2544 keeps for
benchmark networks) with one veth into this process's namespace, so the machine's own
interfaces carry nothing. Each sshd is PID 1 of a PID namespace of its own (a machine's
own process table) with a private mount namespace in which the server's ``/root`` is a
directory of the test's temporary dir (its own ``.ssh``: the cluster key,
authorized_keys, known_hosts) and ``/run`` is a tmpfs of its own (sshd's
privilege-separation dir), so nothing of the machine's root account or ssh setup is read
or changed. Keys are made with ``ssh-keygen`` in the temporary dir. A server can be given
a time namespace whose CLOCK_MONOTONIC is ``monotonic_offsets_s[i]`` seconds ahead: two
real machines' monotonic clocks differ (each counts from its own boot).

Cleanup (also on failure): each server's ``unshare`` (started here, SIGKILLed by PID)
takes its sshd down with it (``--kill-child``), and the kernel ends every other process
of a PID namespace when its PID 1 dies -- the sessions and everything they started,
Mininet's hosts included. Then the namespaces go, taking their veths and tunnel
interfaces along. SIGKILL at once, not SIGTERM and a grace: ``unshare --fork`` blocks
SIGTERM while it waits for its child, so a SIGTERM only ever used up the grace, and a
pretend server has nothing to save.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from topo.namespaces import unique_tag

SSHD = "/usr/sbin/sshd"
SSH_PORT = 22
# Jumbo frames on the LAN, as on a fabric's servers: a tunnel carries the fabric's MTU.
LAN_MTU = 9000
READY_TIMEOUT_S = 20.0

SSHD_CONFIG = """\
ListenAddress {ip}:{port}
HostKey {host_key}
PidFile none
PermitRootLogin prohibit-password
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PermitTunnel ethernet
StrictModes no
MaxStartups 200
MaxSessions 200
"""

CLIENT_CONFIG = """\
Host *
  User root
  IdentityFile {key}
  IdentitiesOnly yes
  UserKnownHostsFile {known_hosts}
  StrictHostKeyChecking yes
  ConnectTimeout 10
"""


class SshServers:
    """``count`` servers, their IPs in ``ips``; ``ssh_config`` is the client config
    that reaches them from this process (the spec's ``cluster.ssh_config``)."""

    def __init__(self, workdir: Path, count: int = 2, monotonic_offsets_s: tuple[int, ...] = ()) -> None:
        self.workdir = Path(workdir)
        self.count = count
        self.monotonic_offsets_s = tuple(monotonic_offsets_s) + (0,) * (count - len(monotonic_offsets_s))
        self.tag = unique_tag()
        self.prefix = _free_prefix(int(self.tag, 16) % 256)
        self.lan_ns = f"astc{self.tag}lan"
        self.namespaces = [f"astc{self.tag}s{i}" for i in range(count)]
        self.ips = [f"{self.prefix}.{2 + i}" for i in range(count)]
        self.local_ip = f"{self.prefix}.1"
        self.ssh_config = self.workdir / "ssh_config"
        self.unshare: list[subprocess.Popen] = []   # one per server; its child is the sshd
        self.sshd_pids: list[int] = []              # each server's PID 1 (its sshd), as seen here
        self._created: list[str] = []

    def __enter__(self) -> "SshServers":
        try:
            self._start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # ---- setup

    def _start(self) -> None:
        key = self.workdir / "id_ed25519"
        _keygen(key)
        host_keys = []
        for i in range(self.count):
            host_key = self.workdir / f"s{i}" / "host_ed25519"
            host_key.parent.mkdir(parents=True)
            _keygen(host_key)
            host_keys.append(host_key)
        known = "".join(f"{ip} {Path(f'{hk}.pub').read_text().strip()}\n" for ip, hk in zip(self.ips, host_keys))
        (self.workdir / "known_hosts").write_text(known)
        self.ssh_config.write_text(CLIENT_CONFIG.format(key=key, known_hosts=self.workdir / "known_hosts"))
        self._lan()
        for i, (ns, ip, host_key) in enumerate(zip(self.namespaces, self.ips, host_keys)):
            home = self._home(i, key, known)
            self._server_ns(i, ns, ip)
            config = self.workdir / f"s{i}" / "sshd_config"
            config.write_text(SSHD_CONFIG.format(ip=ip, port=SSH_PORT, host_key=host_key))
            log = open(self.workdir / f"s{i}" / "sshd.log", "wb")
            script = (f"mount -t tmpfs tmpfs /run && mkdir -m 0755 /run/sshd && "
                      f"mount --bind {home} /root && exec {SSHD} -D -e -f {config}")
            offset = self.monotonic_offsets_s[i]
            clock = ["--time", "--monotonic", str(offset)] if offset else []
            self.unshare.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
                 "--mount", "--propagation", "private", *clock, "sh", "-c", script],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        for i, (ip, proc) in enumerate(zip(self.ips, self.unshare)):
            self._wait_listening(ip, proc)
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            self.sshd_pids.append(int(children[0]))

    def _home(self, i: int, key: Path, known: str) -> Path:
        """Server ``i``'s /root: the cluster key (servers ssh to each other), the key
        authorized, every server's host key known."""
        ssh = self.workdir / f"s{i}" / "home" / ".ssh"
        ssh.mkdir(parents=True, mode=0o700)
        for suffix in ("", ".pub"):
            (ssh / f"id_ed25519{suffix}").write_bytes(Path(f"{key}{suffix}").read_bytes())
        (ssh / "id_ed25519").chmod(0o600)
        (ssh / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
        (ssh / "known_hosts").write_text(known)
        (ssh / "config").write_text("Host *\n  StrictHostKeyChecking yes\n  ConnectTimeout 10\n")
        return ssh.parent

    def _lan(self) -> None:
        """The LAN: a bridge in its own namespace, and this process's veth onto it."""
        self._netns_add(self.lan_ns)
        _run("ip", "-n", self.lan_ns, "link", "add", "br0", "mtu", str(LAN_MTU), "type", "bridge")
        _run("ip", "-n", self.lan_ns, "link", "set", "br0", "up")
        here = f"astc{self.tag}"
        _run("ip", "-n", self.lan_ns, "link", "add", "up0", "mtu", str(LAN_MTU), "type", "veth",
             "peer", "name", here, "mtu", str(LAN_MTU), "netns", str(os.getpid()))
        _run("ip", "-n", self.lan_ns, "link", "set", "up0", "master", "br0", "up")
        _run("ip", "addr", "add", f"{self.local_ip}/24", "dev", here)
        _run("ip", "link", "set", here, "up")

    def _server_ns(self, i: int, ns: str, ip: str) -> None:
        self._netns_add(ns)
        _run("ip", "-n", self.lan_ns, "link", "add", f"s{i}", "mtu", str(LAN_MTU), "type", "veth",
             "peer", "name", "eth0", "mtu", str(LAN_MTU), "netns", ns)
        _run("ip", "-n", self.lan_ns, "link", "set", f"s{i}", "master", "br0", "up")
        _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")

    def _netns_add(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self._created.append(name)

    def _wait_listening(self, ip: str, proc: subprocess.Popen) -> None:
        """Until sshd accepts connections on ``ip``; RuntimeError with its log if it
        exits or does not within READY_TIMEOUT_S."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                with socket.create_connection((ip, SSH_PORT), timeout=0.5):
                    return
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (self.workdir / f"s{self.ips.index(ip)}" / "sshd.log").read_text(errors="replace")
                raise RuntimeError(f"sshd on {ip} did not start (status {proc.poll()}):\n{log}")
            time.sleep(0.05)

    # ---- inspection

    def run(self, server: int, *cmd: str) -> str:
        """Run a command on server ``server`` as its sshd's sessions do: in its network,
        mount, PID and time namespaces (its /proc, its PIDs, its clock)."""
        return _run("nsenter", "-t", str(self.sshd_pids[server]), "-n", "-m", "-p", "-T", "--", *cmd)

    def processes(self, server: int) -> dict[int, list[str]]:
        """PID (the server's own numbering) -> command line of every process on ``server``."""
        script = ('for p in /proc/[0-9]*; do [ ${p#/proc/} != $$ ] && [ -r $p/cmdline ] && printf "%s " ${p#/proc/} && '
                  'tr "\\0" "\\037" < $p/cmdline && echo; done; true')
        out = {}
        for line in self.run(server, "sh", "-c", script).splitlines():
            pid, _, argv = line.partition(" ")
            if argv and int(pid) != 0:
                out[int(pid)] = argv.rstrip("\037").split("\037")
        return out

    # ---- cleanup

    def cleanup(self) -> None:
        """End every process of the servers' namespaces by PID, then delete the
        namespaces this object created (their interfaces go with them)."""
        for proc in self.unshare:
            if proc.poll() is None:
                proc.kill()
        for proc in self.unshare:
            proc.wait()
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._created.clear()


def _free_prefix(start: int) -> str:
    """The first 198.18.N (from N = ``start``) with no address of this namespace in it,
    so that two test runs side by side get LANs of their own."""
    used = _run("ip", "-4", "-o", "addr", "show")
    for n in range(256):
        prefix = f"198.18.{(start + n) % 256}"
        if f" {prefix}." not in used:
            return prefix
    raise RuntimeError("no free 198.18.N.0/24 for the test LAN")


def _keygen(path: Path) -> None:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "astral-cluster-test", "-f", str(path))


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout
