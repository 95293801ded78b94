"""Pretend servers of a cluster on this machine: one network namespace per server, each
running its own sshd, for the cluster-mode tests (`tests/test_topo_cluster.py`).

Mininet's cluster mode reaches each server as root over ssh without a password and lets
servers reach each other the same way (its SSH links run ``ssh -w`` from one server to
the other). Here every server is a network namespace on a private LAN (a bridge in a
namespace of its own, addresses from 198.18.0.0/15, the range RFC 2544 keeps for
benchmark networks) with one veth into this process's namespace, so the machine's own
interfaces carry nothing. Each sshd runs in a private mount namespace in which the
server's ``/root`` is a directory of the test's temporary dir (its own ``.ssh``: the
cluster key, authorized_keys, known_hosts) and ``/run`` is a tmpfs of its own (sshd's
privilege-separation dir), so nothing of the machine's root account or ssh setup is read
or changed. Keys are made with ``ssh-keygen`` in the temporary dir.

Cleanup (also on failure): every process of a server -- its sshd and everything the
sessions started, found by the sshd's private mount namespace (Mininet hosts get network
namespaces of their own, not mount namespaces) -- by PID, then the namespaces, which take
their veths and tunnel interfaces with them.
"""

from __future__ import annotations

import os
import signal
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
STOP_GRACE_S = 3.0

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

    def __init__(self, workdir: Path, count: int = 2) -> None:
        self.workdir = Path(workdir)
        self.count = count
        self.tag = unique_tag()
        subnet = int(self.tag, 16) % 256
        self.prefix = f"198.18.{subnet}"
        self.lan_ns = f"astc{self.tag}lan"
        self.namespaces = [f"astc{self.tag}s{i}" for i in range(count)]
        self.ips = [f"{self.prefix}.{2 + i}" for i in range(count)]
        self.local_ip = f"{self.prefix}.1"
        self.ssh_config = self.workdir / "ssh_config"
        self.sshd: list[subprocess.Popen] = []
        self.mount_ns: list[str] = []       # each server's mount namespace (its processes)
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
            # ip netns exec and unshare exec (no fork): the Popen's PID is sshd's.
            self.sshd.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
                 "sh", "-c", script], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        for ip, proc in zip(self.ips, self.sshd):
            self._wait_listening(ip, proc)
            self.mount_ns.append(os.readlink(f"/proc/{proc.pid}/ns/mnt"))

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
        """Run a command in server ``server``'s namespace (as its sshd's sessions are)."""
        return _run("ip", "netns", "exec", self.namespaces[server], *cmd)

    def pids(self, server: int) -> list[int]:
        """Every process of server ``server``: those in its sshd's mount namespace."""
        if server >= len(self.mount_ns):
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "ns" / "mnt") == self.mount_ns[server]:
                        found.append(int(entry.name))
                except OSError:
                    pass
        return found

    # ---- cleanup

    def cleanup(self) -> None:
        """End every process of the servers' namespaces by PID, then delete the
        namespaces this object created (their interfaces go with them)."""
        for proc in self.sshd:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for i in range(len(self.mount_ns)):
            _end(self.pids(i))
        for proc in self.sshd:
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._created.clear()


def _end(pids: list[int]) -> None:
    """SIGTERM, a grace period, then SIGKILL for what still runs."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _keygen(path: Path) -> None:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "astral-cluster-test", "-f", str(path))


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout
