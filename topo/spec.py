"""The fabric spec: a YAML file read into frozen dataclasses, validated on the way in.

A spec describes *what* fabric to build (sizes, link rates, queues, ECN, hashing); the
addressing plan (`topo.addressing`) derives every name, number and address from it.
Validation happens here, before anything starts, and every error names the YAML key::

    >>> spec = parse_spec({"blocks": 2, "servers_per_block": 2, "rails": 4, "spines": 2})
    >>> spec.leaves, spec.ecn.kmin
    (8, 5)

Loading ``rails: 0`` raises ``SpecError("fabric.yaml: rails: must be at least 1, got 0")``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from p4sim.switch.pfc import DEFAULT_HEADROOM, DEFAULT_XOFF, DEFAULT_XON
from topo.headers import CNP_DSCP, ROCE_PRIORITY, dscp_priority

# Port numbers index the program's per-port counters and registers (NUM_PORTS = 64 in
# p4src/astral.p4), so every switch port number must stay below this.
MAX_PORT = 63
# The fourth octet of a NIC address is server + 1; .254 is the rail gateway.
MAX_SERVERS_PER_BLOCK = 253
# The rail and the block are the second and third octets of a NIC address.
MAX_OCTET_INDEX = 255
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


class SpecError(ValueError):
    """A spec that cannot be built; the message starts with the source and the key."""


@dataclass(frozen=True)
class LinkRates:
    """Line rates in Mbit/s. Scaled down from 400 Gbit/s so that the modelled queues,
    not the switches' Python CPU, are the bottleneck (docs/fabric.md)."""

    host_mbps: float = 10.0
    uplink_mbps: float = 10.0


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
    one leaf per (block, rail), every leaf linked to every spine."""

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
    def switches(self) -> int:
        return self.leaves + self.spines


# Keys of each YAML section -> (dataclass field, expected type). The YAML nests the
# link rates and the ECN profile; everything else is a top-level scalar.
_TOP_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str, "blocks": int, "servers_per_block": int, "rails": int, "spines": int,
    "links": dict, "queue_depth": int, "ecn": dict,
    "ecmp_hash": str, "sample_rate": int, "grpc_port_base": int, "node_prefix": str,
    "pcap": bool, "nvlink": dict, "time_factor": (int, float), "mtu": int,
    "dilation": (int, float, str), "rt_priority": int, "pfc": dict,
}
_REQUIRED = ("blocks", "servers_per_block", "rails", "spines")
_LINK_KEYS = {"host_mbps": (int, float), "uplink_mbps": (int, float)}
_ECN_KEYS = {"kmin": int, "kmax": int, "pmax": (int, float)}
_NVLINK_KEYS = {"gbps": (int, float), "latency_us": (int, float)}
_PFC_KEYS = {"enabled": bool, "priority": int, "xoff": int, "xon": int, "headroom": int,
             "watchdog_ms": (int, float)}


def load_spec(path: str | Path) -> FabricSpec:
    """Read and validate the YAML spec at ``path``."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{source}: cannot read the fabric spec: {e.strerror}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(f"{source}: not valid YAML: {e}") from e
    return parse_spec(data, source)


def parse_spec(data: Any, source: str = "fabric.yaml") -> FabricSpec:
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
    pfc = data.get("pfc", {})
    _check_keys(pfc, _PFC_KEYS, source, "pfc.")
    top = {k: (float(v) if k == "time_factor" else v) for k, v in data.items()
           if k not in ("links", "ecn", "nvlink", "pfc", "dilation")}
    if "dilation" in data:
        top["dilation"] = _dilation(data["dilation"], source)
    spec = FabricSpec(links=LinkRates(**{k: float(v) for k, v in links.items()}),
                      ecn=EcnProfile(**{k: (float(v) if k == "pmax" else v) for k, v in ecn.items()}),
                      nvlink=NvlinkLink(**{k: float(v) for k, v in nvlink.items()}),
                      pfc=PfcSpec(**{k: (float(v) if k == "watchdog_ms" else v) for k, v in pfc.items()}),
                      **top)
    validate(spec, source)
    return spec


def _dilation(value: Any, source: str) -> float:
    """The ``dilation`` key: a number >= 1, or ``auto`` (stored as 0)."""
    if value == "auto":
        return 0.0
    if isinstance(value, str):
        raise SpecError(f"{source}: dilation: a number >= 1 or 'auto', got {value!r}")
    return float(value)


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


def validate(spec: FabricSpec, source: str = "fabric spec") -> None:
    """Raise `SpecError` naming the first key whose value cannot be built."""

    def fail(key: str, message: str) -> None:
        raise SpecError(f"{source}: {key}: {message}")

    for key in ("blocks", "servers_per_block", "rails", "spines", "queue_depth"):
        value = getattr(spec, key)
        if value < 1:
            fail(key, f"must be at least 1, got {value}")
    if spec.blocks > MAX_OCTET_INDEX + 1:
        fail("blocks", f"at most {MAX_OCTET_INDEX + 1} (the block is an address octet), got {spec.blocks}")
    if spec.rails > MAX_OCTET_INDEX + 1:
        fail("rails", f"at most {MAX_OCTET_INDEX + 1} (the rail is an address octet), got {spec.rails}")
    if spec.servers_per_block > MAX_SERVERS_PER_BLOCK:
        fail("servers_per_block", f"more servers than addresses: at most {MAX_SERVERS_PER_BLOCK} "
             f"per block (10.rail.block.1-253), got {spec.servers_per_block}")
    if spec.servers_per_block + spec.spines > MAX_PORT:
        fail("spines", f"a leaf needs servers_per_block + spines = "
             f"{spec.servers_per_block + spec.spines} ports, at most {MAX_PORT}")
    if spec.leaves > MAX_PORT:
        fail("blocks", f"a spine needs blocks x rails = {spec.leaves} ports, at most {MAX_PORT}")
    for key in ("host_mbps", "uplink_mbps"):
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
    if not 1024 <= spec.grpc_port_base <= 65535 - spec.switches:
        fail("grpc_port_base", f"ports {spec.grpc_port_base}..{spec.grpc_port_base + spec.switches - 1} "
             f"must lie in 1024..65535")
    if len(spec.node_prefix) > MAX_PREFIX or not (spec.node_prefix == "" or spec.node_prefix.isalnum()):
        fail("node_prefix", f"at most {MAX_PREFIX} letters/digits (interface names are short), "
             f"got {spec.node_prefix!r}")


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
