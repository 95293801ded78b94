"""The fabric spec: a YAML file read into frozen dataclasses, validated on the way in.

A spec describes *what* fabric to build (sizes, link rates, queues, ECN, hashing); the
addressing plan (`topo.addressing`) derives every name, number and address from it.
Validation happens here, before anything starts, and every error names the YAML key::

    >>> spec = parse_spec({"blocks": 2, "servers_per_block": 2, "rails": 4, "spines": 2})
    >>> spec.leaves, spec.ecn.kmin
    (8, 5)

Loading ``rails: 0`` raises ``SpecError("fabric.yaml: rails: must be at least 1, got 0")``.

Two tiers (leaves, spines) by default; ``pods`` and ``super_spines`` add the cluster
tier: the blocks are split evenly into pods, ``spines`` are per pod, and spine k of
every pod (plane k) links to the ``super_spines`` super-spines of plane k::

    >>> three = parse_spec({"blocks": 4, "servers_per_block": 1, "rails": 2, "spines": 2,
    ...                     "pods": 2, "super_spines": 2})
    >>> three.tiers, three.blocks_per_pod, three.switches
    (3, 2, 16)
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from p4sim.switch.pfc import DEFAULT_HEADROOM, DEFAULT_XOFF, DEFAULT_XON
from topo.ccprofiles import PROFILES, VALUE_KEYS, DcqcnProfile, marking_packets, profile_with
from topo.headers import CNP_DSCP, ROCE_PRIORITY, dscp_priority

# Port numbers index the program's per-port counters and registers (NUM_PORTS = 64 in
# p4src/astral.p4), so every switch port number must stay below this.
MAX_PORT = 63
# The fourth octet of a NIC address is server + 1; .254 is the rail gateway.
MAX_SERVERS_PER_BLOCK = 253
# The rail and the block are the second and third octets of a NIC address.
MAX_OCTET_INDEX = 255
# A NIC address is 10.0.0.0/8 + (rail, block, host) packed MSB first: host 8 bits, the
# block at least 8 (10.rail.block.host, the two-tier layout), more when a fabric has
# more blocks than an octet holds; the rail takes what is left of the 24 bits.
HOST_BITS = 8
FABRIC_BITS = 24
# Linux limits interface names to this many characters (IFNAMSIZ - 1).
MAX_IFNAME = 15
# Marking thresholds are one ecn_threshold entry per queue depth between Kmin and Kmax
# (the table holds 256; one more entry covers "Kmax and above").
MAX_ECN_RAMP = 250
# Hash algorithms the P4 program can be compiled with (HashAlgorithm members whose
# output topo.hashmodel reproduces bit for bit).
HASH_ALGORITHMS = ("crc32", "crc16")
# Linux limits interface names to 15 characters; a prefix keeps two fabrics apart.
MAX_PREFIX = 4
# Emulated time runs this much slower than real time: a 400G fabric's round trip is
# ~10 us, the emulated fabric's (Python switches, 10-20 Mbit/s links) a few ms -- a
# factor of a few hundred. A 50 us CNP interval becomes 10 ms (~23 MTU packets at
# 20 Mbit/s), keeping "several CNP intervals per queue build-up" as in real fabrics.
# Not the rate ratio (40000 for 10 Mbit/s): that would make the CNP interval 2 s.
DEFAULT_TIME_FACTOR = 200.0
# RoCE path MTUs (InfiniBand's: payload bytes per packet). RoCE fabrics run 4096.
ROCE_MTUS = (256, 512, 1024, 2048, 4096)
# Interface MTU for a RoCE path MTU: IPv4 + UDP + BTH + RETH + ICRC headers (60 bytes)
# with room to spare, as RoCE NICs pair path MTU 4096 with an Ethernet MTU of 4200.
ROCE_IFACE_HEADROOM = 104
# Ethernet header, one VLAN tag and the FCS around an interface MTU: the largest frame.
FRAME_OVERHEAD = 18
# A PFC watchdog's default detection (and restoration) time, emulated ms: some 300
# frame times of the default fabric, far beyond any pause an incast causes.
DEFAULT_PFC_WATCHDOG_MS = 1000.0
# SCHED_RR priorities chrt accepts.
MAX_RT_PRIORITY = 99
# The agents' transport engines: the Python reference and the native NIC.
NICS = ("python", "native")
# A spec's ``nic``: one of them, or "auto" -- the native NIC when it builds on this
# machine, else the reference (resolved where the agents start, `tccl.launch.resolve_nic`).
NIC_CHOICES = ("auto", *NICS)
# The agents' transport for every fabric a command starts, over the spec's own ``nic``:
# `make run|demo|test NIC=python|native|auto` sets it.
NIC_ENV = "ASTRAL_NIC"
# The p4sim switches' engines (`switch_engine`, `p4sim switch --engine`): auto runs the
# pipeline and the packet loop in C when the C engine runs the program, else Python.
SWITCH_ENGINES = ("auto", "native", "python")
# How the p4sim switches run (`switch_process`): a process each (`p4sim switch`), or all
# of a fabric in one process with one packet loop thread (`p4sim switches`, a member
# process per switch to kill: a tenth of the wake-ups; docs/fabric.md); auto: shared
# where it can run (native switches on one machine), else own (`switch_process_of`).
SWITCH_PROCESSES = ("auto", "own", "shared")
# Mininet cluster mode's links between servers (mininet.examples.cluster): RemoteGRELink,
# RemoteSSHLink (topo/cluster.py; docs/fabric.md says when to use which).
CLUSTER_LINKS = ("gre", "ssh")


class SpecError(ValueError):
    """A spec that cannot be built; the message starts with the source and the key."""


@dataclass(frozen=True)
class LinkRates:
    """Line rates in Mbit/s. Scaled down from 400 Gbit/s so that the modelled queues,
    not the switches' Python CPU, are the bottleneck (docs/fabric.md)."""

    host_mbps: float = 10.0
    uplink_mbps: float = 10.0
    # Spine -> super-spine links (three tiers); 0 = as ``uplink_mbps``.
    spine_uplink_mbps: float = 0.0

    def __post_init__(self) -> None:
        if not self.spine_uplink_mbps:
            object.__setattr__(self, "spine_uplink_mbps", self.uplink_mbps)


@dataclass(frozen=True)
class EcnProfile:
    """DCQCN's RED profile on the egress queue depth (packets): no marks below
    ``kmin``, probability rising linearly to ``pmax`` at ``kmax``, always above."""

    kmin: int = 5
    kmax: int = 20
    pmax: float = 0.2


@dataclass(frozen=True)
class NvlinkLink:
    """The emulated NVLink between the ranks (GPUs) of one server: the TCCL agents'
    local channel. ``gbps`` 0 means no NVLink (same-server ranks use their NICs); jobs
    take these values unless they set their own."""

    gbps: float = 0.0
    latency_us: float = 5.0


@dataclass(frozen=True)
class ClusterSpec:
    """Mininet's cluster mode: the fabric runs on ``servers`` (reached as root over ssh,
    ``localhost`` = this machine), whole blocks per server (`topo.placement`), the
    links between servers are Mininet's ``link`` tunnels; ``ssh_config`` is an ssh
    client config file (``ssh -F``) for reaching the servers, "" for ssh's own."""

    servers: tuple[str, ...]
    link: str = "gre"
    ssh_config: str = ""


@dataclass(frozen=True)
class PfcSpec:
    """Priority flow control (IEEE 802.1Qbb) on every switch port: ``priority`` (the
    RoCE traffic's, DSCP class selector) is lossless. Thresholds are bytes queued per
    ingress port and priority: PAUSE above ``xoff``, resume at ``xon``, ``headroom``
    admitted above XOFF for what is in flight (docs/fabric.md: 2 x (cable + MTU +
    response)). A queue paused for ``watchdog_ms`` (emulated; 0: off) with packets
    waiting stops being lossless (a pause storm)."""

    enabled: bool = False
    priority: int = ROCE_PRIORITY
    xoff: int = DEFAULT_XOFF
    xon: int = DEFAULT_XON
    headroom: int = DEFAULT_HEADROOM
    watchdog_ms: float = DEFAULT_PFC_WATCHDOG_MS


@dataclass(frozen=True)
class FabricSpec:
    """One fabric: ``blocks`` x ``servers_per_block`` servers with ``rails`` NICs each,
    one leaf per (block, rail), every leaf linked to every spine of its pod. With
    ``super_spines`` (three tiers) the ``blocks`` are split into ``pods`` of
    ``blocks_per_pod`` consecutive blocks, each pod has its own ``spines``, and spine k
    of every pod links to each of the ``super_spines`` super-spines of plane k."""

    blocks: int
    servers_per_block: int
    rails: int
    spines: int
    name: str = "fabric"
    links: LinkRates = field(default_factory=LinkRates)
    queue_depth: int = 64
    ecn: EcnProfile = field(default_factory=EcnProfile)
    ecmp_hash: str = "crc32"
    sample_rate: int = 64
    grpc_port_base: int = 50051
    node_prefix: str = ""
    pcap: bool = False
    nvlink: NvlinkLink = field(default_factory=NvlinkLink)
    pfc: PfcSpec = field(default_factory=PfcSpec)
    # The agents' DCQCN constants and, for a published set, the ECN marking the spec's
    # ``ecn`` takes unless given (topo/ccprofiles.py): ``dcqcn: paper|production|{...}``.
    dcqcn: DcqcnProfile = field(default_factory=DcqcnProfile)
    # Real-world timers (DCQCN's, the CNP interval) x this = the emulation's; rates
    # scale by links.host_mbps / 400 Gbit/s. Jobs on the fabric take it (tccl.job).
    time_factor: float = DEFAULT_TIME_FACTOR
    # RoCE path MTU (payload bytes per packet) of the agents; every cable's interfaces
    # get `iface_mtu` (docs/fabric.md: why 4096 with 10 Mbit/s links).
    mtu: int = 4096
    # Wall seconds per emulated second (emulation/clock.py); "auto" = calibrated at
    # fabric start (topo/dilation.py). Stored as a number, 0 meaning "auto".
    dilation: float = 1.0
    # Switch and agent processes run SCHED_RR at this priority (0: normal scheduling),
    # so that other work on the machine cannot hold the emulated network off the CPU.
    rt_priority: int = 10
    # The agents' RoCE transport (tccl.engine): the Python reference, or the NIC in C
    # (tccl/nic), the same semantics for far less CPU per frame; "auto" (the default):
    # native if it builds here, else the reference (docs/tccl.md).
    nic: str = "auto"
    # The p4sim switches' engine (SWITCH_ENGINES): auto = native switches for astral.p4.
    switch_engine: str = "auto"
    # One process per p4sim switch, or one for all (SWITCH_PROCESSES).
    switch_process: str = "auto"
    # The cluster tier: 1 pod and no super-spines is the two-tier fabric.
    pods: int = 1
    super_spines: int = 0
    # More than one machine (Mininet cluster mode); None: everything on this machine.
    cluster: ClusterSpec | None = None

    @property
    def iface_mtu(self) -> int:
        """The interface MTU of every cable (host NICs and switch ports)."""
        return max(1500, self.mtu + ROCE_IFACE_HEADROOM)

    @property
    def frame_bytes(self) -> int:
        """The largest frame on a cable (interface MTU + Ethernet header, tag, FCS)."""
        return self.iface_mtu + FRAME_OVERHEAD

    @property
    def leaves(self) -> int:
        return self.blocks * self.rails

    @property
    def tiers(self) -> int:
        """Switch tiers: 2 (leaves, spines) or 3 (and super-spines)."""
        return 3 if self.super_spines else 2

    @property
    def blocks_per_pod(self) -> int:
        return self.blocks // self.pods

    @property
    def spine_switches(self) -> int:
        """Spines of the whole fabric (``spines`` per pod)."""
        return self.pods * self.spines

    @property
    def super_spine_switches(self) -> int:
        """Super-spines of the whole fabric (``super_spines`` per spine plane)."""
        return self.spines * self.super_spines

    @property
    def switches(self) -> int:
        return self.leaves + self.spine_switches + self.super_spine_switches

    @property
    def block_bits(self) -> int:
        """Width of the block field of a NIC address (see `HOST_BITS`)."""
        return max(8, (self.blocks - 1).bit_length())

    @property
    def leaf_oversubscription(self) -> float:
        """A leaf's NIC capacity over its uplink capacity (1 = non-blocking)."""
        return (self.servers_per_block * self.links.host_mbps) / (self.spines * self.links.uplink_mbps)

    @property
    def spine_oversubscription(self) -> float | None:
        """A spine's leaf-facing capacity over its super-spine capacity (None: two tiers)."""
        if not self.super_spines:
            return None
        return (self.blocks_per_pod * self.rails * self.links.uplink_mbps) / \
            (self.super_spines * self.links.spine_uplink_mbps)


# Keys of each YAML section -> (dataclass field, expected type). The YAML nests the
# link rates and the ECN profile; everything else is a top-level scalar.
_TOP_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str, "blocks": int, "servers_per_block": int, "rails": int, "spines": int,
    "links": dict, "queue_depth": int, "ecn": dict,
    "ecmp_hash": str, "sample_rate": int, "grpc_port_base": int, "node_prefix": str,
    "pcap": bool, "nvlink": dict, "time_factor": (int, float), "mtu": int,
    "dilation": (int, float, str), "rt_priority": int, "nic": str,
    "switch_engine": str, "switch_process": str, "pods": int, "super_spines": int,
    "oversubscription": dict, "cluster": (dict, type(None)), "pfc": dict, "dcqcn": (str, dict),
}
_REQUIRED = ("blocks", "servers_per_block", "rails", "spines")
_LINK_KEYS = {"host_mbps": (int, float), "uplink_mbps": (int, float),
              "spine_uplink_mbps": (int, float)}
# Oversubscription per tier: given instead of that tier's uplink rate, which it derives.
_OVERSUB_KEYS = {"leaf": (int, float), "spine": (int, float)}
_ECN_KEYS = {"kmin": int, "kmax": int, "pmax": (int, float)}
_NVLINK_KEYS = {"gbps": (int, float), "latency_us": (int, float)}
_CLUSTER_KEYS = {"servers": list, "link": str, "ssh_config": str}
_PFC_KEYS = {"enabled": bool, "priority": int, "xoff": int, "xon": int, "headroom": int,
             "watchdog_ms": (int, float)}


def load_spec(path: str | Path, emulated: bool = True) -> FabricSpec:
    """Read and validate the YAML spec at ``path`` (``emulated``: see `validate`)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{source}: cannot read the fabric spec: {e.strerror}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(f"{source}: not valid YAML: {e}") from e
    return parse_spec(data, source, emulated)


def at_link_rate(data: Mapping[str, Any], host_mbps: float, source: str = "fabric.yaml") -> dict[str, Any]:
    """A copy of the spec document ``data`` with its NICs' links at ``host_mbps`` and the
    profile restated to mean the same in frames (docs/fabric.md "Restating the profile"):
    every tier's rate x host_mbps / the old host rate, ``time_factor`` / that ratio (so
    DCQCN's timers, the CNP interval and its byte counter stay the same frame times and
    frames); queue depth, Kmin/Kmax (packets) and PFC's thresholds (bytes of frames) as
    they are. `python -m bench rates` sweeps the default shape's rate with it."""
    if not (isinstance(host_mbps, (int, float)) and host_mbps > 0 and math.isfinite(host_mbps)):
        raise SpecError(f"{source}: links.host_mbps: a rate in Mbit/s > 0, got {host_mbps!r}")
    links = dict(data.get("links") or {})
    ratio = host_mbps / float(links.get("host_mbps", LinkRates.host_mbps))
    out = dict(data)
    out["links"] = {k: v * ratio for k, v in links.items()} | {"host_mbps": host_mbps}
    out["time_factor"] = float(data.get("time_factor", DEFAULT_TIME_FACTOR)) / ratio
    return out


def nic_choice(spec: FabricSpec) -> str:
    """The agents' transport as asked: $ASTRAL_NIC (make NIC=) when set, else the
    spec's ``nic`` (one of NIC_CHOICES; "auto" is resolved where agents start)."""
    choice = os.environ.get(NIC_ENV) or spec.nic
    if choice not in NIC_CHOICES:
        raise SpecError(f"{NIC_ENV} (make NIC=): one of {', '.join(NIC_CHOICES)}, got {choice!r}")
    return choice


def switch_process_of(spec: FabricSpec) -> str:
    """``own`` or ``shared``: the spec's ``switch_process``, ``auto`` decided -- shared
    (one packet loop, a member process per switch to kill) for native-capable switches
    on one machine; own for Python switches and cluster mode, which shared cannot run."""
    if spec.switch_process != "auto":
        return spec.switch_process
    return "own" if spec.switch_engine == "python" or spec.cluster is not None else "shared"


def parse_spec(data: Any, source: str = "fabric.yaml", emulated: bool = True) -> FabricSpec:
    """Validate an already-parsed YAML document and build the spec."""
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: a fabric spec is a mapping of keys, found {type(data).__name__}")
    _check_keys(data, _TOP_KEYS, source, "")
    for key in _REQUIRED:
        if key not in data:
            raise SpecError(f"{source}: {key}: missing (required keys: {', '.join(_REQUIRED)})")
    links = data.get("links", {})
    _check_keys(links, _LINK_KEYS, source, "links.")
    ecn = data.get("ecn", {})
    _check_keys(ecn, _ECN_KEYS, source, "ecn.")
    nvlink = data.get("nvlink", {})
    _check_keys(nvlink, _NVLINK_KEYS, source, "nvlink.")
    oversub = data.get("oversubscription", {})
    _check_keys(oversub, _OVERSUB_KEYS, source, "oversubscription.")
    pfc = data.get("pfc", {})
    _check_keys(pfc, _PFC_KEYS, source, "pfc.")
    dcqcn = _dcqcn(data.get("dcqcn", "testbed"), source)
    top = {k: (float(v) if k == "time_factor" else v) for k, v in data.items()
           if k not in ("links", "ecn", "nvlink", "pfc", "dilation", "oversubscription", "cluster", "dcqcn")}
    if "dilation" in data:
        top["dilation"] = _dilation(data["dilation"], source)
    if data.get("cluster") is not None:   # `cluster:` left empty (or a dumped spec's null): none
        top["cluster"] = _cluster(data["cluster"], source)
    rates = _link_rates(data, links, oversub, source)
    spec = FabricSpec(links=rates, dcqcn=dcqcn,
                      ecn=EcnProfile(**{k: (float(v) if k == "pmax" else v) for k, v in ecn.items()}),
                      nvlink=NvlinkLink(**{k: float(v) for k, v in nvlink.items()}),
                      pfc=PfcSpec(**{k: (float(v) if k == "watchdog_ms" else v) for k, v in pfc.items()}),
                      **top)
    if "ecn" not in data and dcqcn.has_marking:
        kmin, kmax, pmax = marking_packets(dcqcn, spec.links.host_mbps, spec.time_factor, spec.frame_bytes)
        spec = dataclasses.replace(spec, ecn=EcnProfile(kmin, kmax, pmax))
    validate(spec, source, emulated)
    return spec


def _link_rates(data: Mapping[str, Any], links: Mapping[str, Any], oversub: Mapping[str, Any],
                source: str) -> LinkRates:
    """The ``links`` section, with a tier's uplink rate derived from its
    ``oversubscription`` (capacity below / capacity above) where one is given."""
    rates = {k: float(v) for k, v in links.items()}
    for tier, key in (("leaf", "uplink_mbps"), ("spine", "spine_uplink_mbps")):
        if tier not in oversub:
            continue
        if key in links:
            raise SpecError(f"{source}: oversubscription.{tier}: give it or links.{key}, not both")
        ratio = oversub[tier]
        if not ratio > 0:
            raise SpecError(f"{source}: oversubscription.{tier}: must be > 0, got {ratio}")
        try:
            if tier == "leaf":
                below = data["servers_per_block"] * rates.get("host_mbps", LinkRates.host_mbps)
                uplinks = data["spines"]
            else:
                below = (data["blocks"] // data.get("pods", 1)) * data["rails"] * \
                    rates.get("uplink_mbps", LinkRates.uplink_mbps)
                uplinks = data.get("super_spines", 0)
            rates[key] = below / (uplinks * ratio)
        except (TypeError, ZeroDivisionError):
            need = "servers_per_block, spines" if tier == "leaf" else "blocks, rails, super_spines >= 1"
            raise SpecError(f"{source}: oversubscription.{tier}: needs {need}") from None
    return LinkRates(**rates)


def _dcqcn(value: Any, source: str) -> DcqcnProfile:
    """The ``dcqcn`` key: a profile's name, or a mapping ``{profile: NAME, key: value}``
    (profile default ``testbed``) that changes some of its values."""
    names = ", ".join(PROFILES)
    if isinstance(value, str):
        value = {"profile": value}
    _check_keys(value, {"profile": str, **{k: (int, float, type(None)) for k in VALUE_KEYS}}, source, "dcqcn.")
    name = value.get("profile", "testbed")
    if name not in PROFILES:
        raise SpecError(f"{source}: dcqcn.profile: one of {names}, got {name!r}")
    changes = {k: v for k, v in value.items() if k != "profile"}
    for key, v in changes.items():
        if v is not None and (not math.isfinite(v) or v < 0 or (v == 0 and key not in ("byte_counter_kb", "kmin_kb"))):
            raise SpecError(f"{source}: dcqcn.{key}: must be a number > 0"
                            f"{' (0: none)' if key == 'byte_counter_kb' else ''}, got {v}")
    profile = profile_with(name, changes)
    if profile.fast_recovery_steps is not None and profile.fast_recovery_steps != int(profile.fast_recovery_steps):
        raise SpecError(f"{source}: dcqcn.fast_recovery_steps: a whole number, got {profile.fast_recovery_steps}")
    if profile.g is not None and not profile.g < 1:
        raise SpecError(f"{source}: dcqcn.g: alpha's gain, in (0, 1), got {profile.g}")
    if profile.pmax is not None and not profile.pmax <= 1:
        raise SpecError(f"{source}: dcqcn.pmax: a probability in (0, 1], got {profile.pmax}")
    marking = [k for k in ("kmin_kb", "kmax_kb", "pmax") if getattr(profile, k) is not None]
    if marking and len(marking) < 3:
        raise SpecError(f"{source}: dcqcn: kmin_kb, kmax_kb and pmax go together (or none: the "
                        f"spec's ecn), got only {', '.join(marking)}")
    if profile.has_marking and profile.kmax_kb <= profile.kmin_kb:
        raise SpecError(f"{source}: dcqcn.kmax_kb: must be above kmin_kb ({profile.kmin_kb}), "
                        f"got {profile.kmax_kb}")
    return profile


def _dilation(value: Any, source: str) -> float:
    """The ``dilation`` key: a number >= 1, or ``auto`` (stored as 0)."""
    if value == "auto":
        return 0.0
    if isinstance(value, str):
        raise SpecError(f"{source}: dilation: a number >= 1 or 'auto', got {value!r}")
    return float(value)


def _cluster(data: Any, source: str) -> ClusterSpec:
    """The ``cluster`` section: ``servers`` (required, a list of host names or
    addresses), ``link``, ``ssh_config``."""
    _check_keys(data, _CLUSTER_KEYS, source, "cluster.")
    if "servers" not in data:
        raise SpecError(f"{source}: cluster.servers: missing (the machines the fabric runs on)")
    servers = data["servers"]
    for i, server in enumerate(servers):
        if not isinstance(server, str) or not server.strip() or any(c.isspace() for c in server):
            raise SpecError(f"{source}: cluster.servers[{i}]: a host name or address, got {server!r}")
    return ClusterSpec(servers=tuple(servers), **{k: v for k, v in data.items() if k != "servers"})


def _check_keys(data: Any, known: Mapping[str, type | tuple[type, ...]], source: str,
                where: str) -> None:
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: {where.rstrip('.')}: expected a mapping, found {type(data).__name__}")
    for key, value in data.items():
        if key not in known:
            raise SpecError(f"{source}: {where}{key}: unknown key "
                            f"(known keys here: {', '.join(sorted(known))})")
        expected = known[key]
        # YAML's booleans are ints to Python; a count given as `yes` is a mistake.
        if isinstance(value, bool) and expected is not bool:
            ok = False
        else:
            ok = isinstance(value, expected)
        if not ok:
            names = expected.__name__ if isinstance(expected, type) else \
                " or ".join(t.__name__ for t in expected)
            raise SpecError(f"{source}: {where}{key}: expected {names}, got {value!r}")


def validate(spec: FabricSpec, source: str = "fabric spec", emulated: bool = True) -> None:
    """Raise `SpecError` naming the first key whose value cannot be built. With
    ``emulated`` False only what the addressing plan needs is checked, not the limits
    of the emulated switches (ports, gRPC ports, interface names): a flow-level model
    of a 100k-GPU fabric describes switches far larger than astral.p4's 64 ports."""

    def fail(key: str, message: str) -> None:
        raise SpecError(f"{source}: {key}: {message}")

    for key in ("blocks", "servers_per_block", "rails", "spines", "queue_depth", "pods"):
        value = getattr(spec, key)
        if value < 1:
            fail(key, f"must be at least 1, got {value}")
    if spec.super_spines < 0:
        fail("super_spines", f"must be >= 0 (0 = two tiers), got {spec.super_spines}")
    if spec.pods > 1 and not spec.super_spines:
        fail("super_spines", f"{spec.pods} pods are joined by super-spines: need at least 1 per plane")
    if spec.blocks % spec.pods:
        fail("pods", f"the {spec.blocks} blocks must split evenly into pods, got {spec.pods} pods")
    rail_bits = FABRIC_BITS - HOST_BITS - spec.block_bits
    if spec.block_bits > 8 and (rail_bits < 0 or spec.rails > 1 << rail_bits):
        fail("blocks", f"{spec.blocks} blocks take {spec.block_bits} address bits, leaving room "
             f"for {1 << rail_bits if rail_bits >= 0 else 0} rails, not {spec.rails}")
    if spec.rails > MAX_OCTET_INDEX + 1:
        fail("rails", f"at most {MAX_OCTET_INDEX + 1} (the rail is an address octet), got {spec.rails}")
    if spec.servers_per_block > MAX_SERVERS_PER_BLOCK:
        fail("servers_per_block", f"more servers than addresses: at most {MAX_SERVERS_PER_BLOCK} "
             f"per block (10.rail.block.1-253), got {spec.servers_per_block}")
    if emulated:
        _validate_emulated(spec, fail)
    for key in ("host_mbps", "uplink_mbps", "spine_uplink_mbps"):
        if not getattr(spec.links, key) > 0:
            fail(f"links.{key}", f"must be > 0 Mbit/s, got {getattr(spec.links, key)}")
    if spec.nvlink.gbps < 0:
        fail("nvlink.gbps", f"must be >= 0 Gbit/s (0 = no NVLink), got {spec.nvlink.gbps}")
    if spec.nvlink.latency_us < 0:
        fail("nvlink.latency_us", f"must be >= 0 microseconds, got {spec.nvlink.latency_us}")
    if not (spec.time_factor > 0 and math.isfinite(spec.time_factor)):
        fail("time_factor", f"emulated time per real time must be a number > 0, got {spec.time_factor}")
    if spec.mtu not in ROCE_MTUS:
        fail("mtu", f"a RoCE path MTU, one of {', '.join(map(str, ROCE_MTUS))}, got {spec.mtu}")
    if not (spec.dilation == 0 or (spec.dilation >= 1 and math.isfinite(spec.dilation))):
        fail("dilation", f"wall seconds per emulated second: a number >= 1 or 'auto', "
             f"got {spec.dilation}")
    if not 0 <= spec.rt_priority <= MAX_RT_PRIORITY:
        fail("rt_priority", f"a SCHED_RR priority 1..{MAX_RT_PRIORITY}, or 0 for normal "
             f"scheduling, got {spec.rt_priority}")
    if spec.nic not in NIC_CHOICES:
        fail("nic", f"the agents' transport, one of {', '.join(NIC_CHOICES)}, got {spec.nic!r}")
    if spec.switch_engine not in SWITCH_ENGINES:
        fail("switch_engine", f"the p4sim switches' engine, one of {', '.join(SWITCH_ENGINES)}, "
             f"got {spec.switch_engine!r}")
    if spec.switch_process not in SWITCH_PROCESSES:
        fail("switch_process", f"how the p4sim switches run, one of {', '.join(SWITCH_PROCESSES)}, "
             f"got {spec.switch_process!r}")
    if spec.switch_process == "shared" and spec.switch_engine == "python":
        fail("switch_process", "shared runs native switches only (one C loop for all): "
             "switch_engine python needs switch_process own")
    if spec.switch_process == "shared" and spec.cluster is not None:
        fail("switch_process", "shared runs the switches of one machine: cluster mode needs "
             "switch_process own")
    if spec.cluster is not None:
        _validate_cluster(spec, fail)
    ecn = spec.ecn
    if ecn.kmin < 0:
        fail("ecn.kmin", f"must be >= 0 packets, got {ecn.kmin}")
    if ecn.kmax <= ecn.kmin:
        fail("ecn.kmax", f"must be greater than ecn.kmin ({ecn.kmin}), got {ecn.kmax}")
    if ecn.kmax - ecn.kmin > MAX_ECN_RAMP:
        fail("ecn.kmax", f"kmax - kmin must be at most {MAX_ECN_RAMP} packets, got {ecn.kmax - ecn.kmin}")
    if not 0 < ecn.pmax <= 1:
        fail("ecn.pmax", f"a probability in (0, 1], got {ecn.pmax}")
    _validate_pfc(spec, fail)
    if spec.ecmp_hash not in HASH_ALGORITHMS:
        fail("ecmp_hash", f"one of {', '.join(HASH_ALGORITHMS)}, got {spec.ecmp_hash!r}")
    if spec.sample_rate < 0:
        fail("sample_rate", f"1-in-N sampling needs N >= 0 (0 = off), got {spec.sample_rate}")
    if len(spec.node_prefix) > MAX_PREFIX or not (spec.node_prefix == "" or spec.node_prefix.isalnum()):
        fail("node_prefix", f"at most {MAX_PREFIX} letters/digits (interface names are short), "
             f"got {spec.node_prefix!r}")


def _validate_cluster(spec: FabricSpec, fail: Any) -> None:
    servers = spec.cluster.servers
    if not servers:
        fail("cluster.servers", "at least one server")
    if len(set(servers)) != len(servers):
        fail("cluster.servers", f"each server once, got {', '.join(servers)}")
    if len(servers) > spec.blocks:
        fail("cluster.servers", f"whole blocks go to a server, so at most blocks = {spec.blocks} "
             f"servers, got {len(servers)}")
    if spec.cluster.link not in CLUSTER_LINKS:
        fail("cluster.link", f"one of {', '.join(CLUSTER_LINKS)}, got {spec.cluster.link!r}")


def _validate_emulated(spec: FabricSpec, fail: Callable[[str, str], None]) -> None:
    """What only a fabric that runs needs: switch ports below the program's NUM_PORTS,
    a gRPC port per switch, interface names Linux accepts."""
    if spec.servers_per_block + spec.spines > MAX_PORT:
        fail("spines", f"a leaf needs servers_per_block + spines = "
             f"{spec.servers_per_block + spec.spines} ports, at most {MAX_PORT}")
    if spec.tiers == 2 and spec.leaves > MAX_PORT:
        fail("blocks", f"a spine needs blocks x rails = {spec.leaves} ports, at most {MAX_PORT}")
    if spec.tiers == 3:
        down = spec.blocks_per_pod * spec.rails
        if down + spec.super_spines > MAX_PORT:
            fail("super_spines", f"a spine needs blocks per pod x rails + super_spines = "
                 f"{down + spec.super_spines} ports, at most {MAX_PORT}")
        if spec.pods > MAX_PORT:
            fail("pods", f"a super-spine needs one port per pod, at most {MAX_PORT}, got {spec.pods}")
        # The longest switch interface: <prefix>ss<n>-eth<port> (topo.addressing names).
        longest = len(spec.node_prefix) + len(f"ss{spec.super_spine_switches - 1}-eth{MAX_PORT}")
        if longest > MAX_IFNAME:
            fail("super_spines", f"{spec.super_spine_switches} super-spines make interface names of "
                 f"{longest} characters, Linux allows {MAX_IFNAME}")
    if not 1024 <= spec.grpc_port_base <= 65535 - spec.switches:
        fail("grpc_port_base", f"ports {spec.grpc_port_base}..{spec.grpc_port_base + spec.switches - 1} "
             f"must lie in 1024..65535")


def min_headroom(spec: FabricSpec) -> int:
    """The least PFC headroom the spec's links need: 2 x (cable + MTU + response) with
    no cable delay (veth pairs) and a response of one frame time (docs/fabric.md)."""
    return 2 * (0 + spec.frame_bytes + spec.frame_bytes)


def _validate_pfc(spec: FabricSpec, fail: Callable[[str, str], None]) -> None:
    pfc = spec.pfc
    cnp = dscp_priority(CNP_DSCP)
    if not 0 <= pfc.priority < cnp:
        fail("pfc.priority", f"the RoCE traffic's priority, 0..{cnp - 1} (below the CNPs' {cnp}), "
             f"got {pfc.priority}")
    if pfc.xoff < spec.frame_bytes:
        fail("pfc.xoff", f"bytes per ingress port and priority: at least one frame "
             f"({spec.frame_bytes} bytes at mtu {spec.mtu}), got {pfc.xoff}")
    if not 0 <= pfc.xon < pfc.xoff:
        fail("pfc.xon", f"bytes, 0 <= xon < pfc.xoff ({pfc.xoff}), got {pfc.xon}")
    if pfc.headroom < min_headroom(spec):
        fail("pfc.headroom", f"bytes above XOFF for what is in flight: at least 2 x (cable 0 + "
             f"frame + response of one frame) = {min_headroom(spec)} at mtu {spec.mtu}, "
             f"got {pfc.headroom}")
    if not (pfc.watchdog_ms >= 0 and math.isfinite(pfc.watchdog_ms)):
        fail("pfc.watchdog_ms", f"emulated ms, >= 0 (0: no watchdog), got {pfc.watchdog_ms}")


def replace(spec: FabricSpec, **changes: Any) -> FabricSpec:
    """A validated copy of ``spec`` with some fields changed (tests pick free ports)."""
    new = dataclasses.replace(spec, **changes)
    validate(new)
    return new
