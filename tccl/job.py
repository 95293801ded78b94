"""A job: which ranks exist (one per rail NIC), how the transport runs, what to execute.

Every agent of a job reads the same job file and derives everything else from it --
queue-pair numbers, ring orders, source ports -- deterministically, so agents need no
connection set-up exchange (as if the QP numbers had been swapped out of band). The
file is YAML (JSON is YAML too)::

    ranks:                      # one per rail NIC; the rank is the list index
      - {server: b0h0, block: 0, rail: 0, iface: eth0, ip: 10.0.0.1,
         mac: "02:00:0a:00:00:01", gateway_mac: "02:ff:00:00:00:01"}
    transport: {mtu: 4096, window: 16, line_mbps: 20, ports: orthogonal}
    workload: {kind: bench, op: allreduce, sizes: [65536, 1048576], iters: 3}

`job_from_fabric` writes the ranks of a fabric from its addressing plan.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from tccl.dcqcn import DcqcnParams, Scale
from tccl.ranks import OPS, JobError, RankInfo, read_yaml
from tccl.trace import check_trace, load_trace
from topo.headers import CNP_DSCP, dscp_priority
from topo.ccprofiles import DcqcnProfile
from topo.spec import DEFAULT_TIME_FACTOR, FabricSpec, NvlinkLink, PfcSpec, SpecError, load_spec

# QP numbers: the QP's index within its connection in bits 21-23, bit 20 set (QPN 0
# and 1 are special in InfiniBand), then the local rank and the peer rank in 10 bits
# each -- so a job holds at most 1024 ranks and a connection at most 8 QPs.
MAX_RANKS = 1024
MAX_QPS = 8
ORDERS = ("rail", "input")
ALGOS = ("ring", "tree")
PORT_MODES = ("random", "orthogonal")


# Go-back-N window: 64 KiB in flight per QP (64 frames at MTU 1024, 16 at 4096), a few
# bandwidth-delay products of the emulated fabric; the windows of the four QPs a
# colliding uplink carries at most in the demo fit one egress queue (64 frames), so a
# collision builds a queue and ECN marks, not tail drops.
WINDOW_BYTES = 64 * 1024
# Retransmission timeout per KiB of MTU: it scales with the frame time, so it stays the
# same number of frame times (300 at 10 Mbit/s: a full queue on two hops and the ACK
# back) at every MTU -- 0.25 s at MTU 1024, 1 s at 4096.
RTO_S_PER_KIB = 0.25


@dataclass(frozen=True)
class Transport:
    """Transport settings shared by all agents of a job."""

    # RoCE path MTU (payload bytes per packet). None = the fabric spec's `mtu` (no
    # spec: its default); a `Job` always holds the resolved number.
    mtu: int | None = None
    # Max unacknowledged packets per QP, and go-back-N's retransmission timeout (s).
    # None = from the MTU (`WINDOW_BYTES`, `RTO_S_PER_KIB`); a `Job` holds the numbers.
    window: int | None = None
    rto: float | None = None
    line_mbps: float = 20.0               # NIC line rate of the emulated fabric
    # Emulated time per real time (DCQCN's timers). None = the fabric spec's
    # `time_factor` (no spec: its default); a `Job` always holds the resolved number.
    time_factor: float | None = None
    ports: str = "random"                 # source-port planning mode
    seed: int = 1                         # seeds random ports and synthetic data
    # Same-server ranks: local channel rate (0 = off) and latency. None = the fabric
    # spec's `nvlink` (no spec: off, 5 us); a `Job` always holds the resolved numbers.
    nvlink_gbps: float | None = None
    nvlink_latency_us: float | None = None
    tp_split: bool = False                # traces: tp AllReduce over NVLink and NICs at once
    # Traces: an all-to-all's cross-rail messages hop over NVLink to the server-mate on
    # the destination's rail and leave by its NIC (NCCL's PXN; needs NVLink).
    pxn: bool = False
    qps: int = 1                          # QPs per connection (NCCL_IB_QPS_PER_CONNECTION)
    # Priority of the RoCE data and ACKs (their DSCP's class selector, topo.headers):
    # None = the fabric spec's `pfc.priority`, the lossless one; a `Job` holds the number.
    priority: int | None = None
    # DCQCN's constants (topo/ccprofiles.py). None = the fabric spec's `dcqcn` (no spec:
    # the testbed profile); a `Job` holds the profile (a job file: its mapping).
    dcqcn_profile: DcqcnProfile | None = None
    # The agents' rate timeline: one sample per sending QP this often (emulated s).
    timeline_s: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.dcqcn_profile, Mapping):     # read from a job file
            try:
                object.__setattr__(self, "dcqcn_profile", DcqcnProfile(**self.dcqcn_profile))
            except TypeError as e:
                raise JobError(f"transport.dcqcn_profile: {e}") from e

    @property
    def line_rate_bps(self) -> float:
        return self.line_mbps * 1e6

    def dcqcn(self) -> DcqcnParams:
        """DCQCN constants of the job's profile, scaled to this fabric's line rate
        (from the profile's reference rate) and time factor."""
        if self.time_factor is None:
            raise JobError("transport.time_factor is unset: a Job resolves it from its fabric spec")
        params = DcqcnParams.from_profile(self.dcqcn_profile or DcqcnProfile())
        return params.scaled(Scale.for_line_rate(self.line_rate_bps, self.time_factor, params.line_rate))


@dataclass(frozen=True)
class Workload:
    """What the agents run: ``bench`` (nccl-tests style sweep of one collective)."""

    op: str = "allreduce"
    sizes: tuple[int, ...] = (1 << 16,)
    iters: int = 3
    warmup: int = 1
    order: str = "rail"
    algo: str = "ring"                    # allreduce: ring or tree (both ordered by `order`)
    check: bool = True
    pairs: tuple[tuple[int, int], ...] = ((0, 1),)   # sendrecv: concurrent (sender, receiver)
    trace: str | None = None              # a traces/*.yaml file: run it instead of a sweep

    def __post_init__(self) -> None:
        # YAML gives lists; keep the dataclass hashable and comparable.
        object.__setattr__(self, "sizes", tuple(self.sizes))
        object.__setattr__(self, "pairs", tuple(tuple(p) for p in self.pairs))


@dataclass(frozen=True)
class Job:
    ranks: tuple[RankInfo, ...]
    transport: Transport = field(default_factory=Transport)
    workload: Workload = field(default_factory=Workload)
    name: str = "job"
    fabric: str | None = None             # fabric spec path (orthogonal ports need it)

    def __post_init__(self) -> None:
        object.__setattr__(self, "transport", _resolve_from_fabric(self.transport, self.fabric))

    def server_ranks(self, server: str) -> list[RankInfo]:
        found = [r for r in self.ranks if r.server == server]
        if not found:
            servers = sorted({r.server for r in self.ranks})
            raise JobError(f"server {server!r} has no ranks in job {self.name!r} "
                           f"(servers: {', '.join(servers)})")
        return found

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ranks"] = [{k: v for k, v in r.items() if k != "rank"} for r in d["ranks"]]
        d["workload"]["sizes"] = list(self.workload.sizes)
        d["workload"]["pairs"] = [list(p) for p in self.workload.pairs]
        if self.fabric is None:
            del d["fabric"]
        if self.workload.trace is None:
            del d["workload"]["trace"]
        return d

    def save(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False), encoding="utf-8")


def _resolve_from_fabric(t: Transport, fabric: str | None, source: str = "job") -> Transport:
    """``t`` with the NVLink settings, time factor and MTU it leaves unset taken from the
    fabric spec's ``nvlink`` section, ``time_factor`` and ``mtu`` (the spec's defaults
    when the job names no fabric)."""
    if None not in (t.nvlink_gbps, t.nvlink_latency_us, t.time_factor, t.mtu, t.window, t.rto, t.priority,
                    t.dcqcn_profile):
        return t
    try:
        spec = load_spec(fabric) if fabric else None
    except SpecError as e:
        raise JobError(f"{source}: fabric: the job's NVLink settings and time factor come "
                       f"from this spec: {e}") from e
    return _filled_from(t, spec)


def _filled_from(t: Transport, spec: FabricSpec | None) -> Transport:
    """`_resolve_from_fabric` with the spec already loaded (None: its defaults)."""
    link = spec.nvlink if spec else NvlinkLink()
    factor = spec.time_factor if spec else DEFAULT_TIME_FACTOR
    mtu = t.mtu if t.mtu is not None else (spec.mtu if spec else FabricSpec.mtu)
    priority = (spec.pfc if spec else PfcSpec()).priority if t.priority is None else t.priority
    profile = (spec.dcqcn if spec else DcqcnProfile()) if t.dcqcn_profile is None else t.dcqcn_profile
    return dataclasses.replace(
        t, priority=priority, dcqcn_profile=profile,
        nvlink_gbps=link.gbps if t.nvlink_gbps is None else t.nvlink_gbps,
        nvlink_latency_us=link.latency_us if t.nvlink_latency_us is None else t.nvlink_latency_us,
        time_factor=factor if t.time_factor is None else t.time_factor, mtu=mtu,
        window=max(1, WINDOW_BYTES // mtu) if t.window is None else t.window,
        rto=RTO_S_PER_KIB * mtu / 1024 if t.rto is None else t.rto)


def qpn(local: int, peer: int, index: int = 0) -> int:
    """The QP number of rank ``local``'s queue pair number ``index`` connected to rank
    ``peer`` (index 0 is the only one unless the job runs several QPs per connection)."""
    return (index << 21) | (1 << 20) | (local << 10) | peer


def qpn_ranks(number: int) -> tuple[int, int] | None:
    """(local, peer) of a QP number made by `qpn`, or None for any other number."""
    if (number >> 20) & 1 != 1 or number >> 24:
        return None
    return (number >> 10) & 0x3FF, number & 0x3FF


def qpn_index(number: int) -> int:
    """The index within its connection of a QP number made by `qpn`."""
    return (number >> 21) & (MAX_QPS - 1)


def _section(data: Mapping[str, Any], key: str, cls: type, source: str) -> Any:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise JobError(f"{source}: {key}: expected a mapping, got {value!r}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    for k in value:
        if k not in names:
            raise JobError(f"{source}: {key}.{k}: unknown key (known: {', '.join(names)})")
    try:
        out = {k: (tuple(v) if isinstance(v, list) else v) for k, v in value.items()}
        return cls(**out)
    except TypeError as e:
        raise JobError(f"{source}: {key}: {e}") from e


def parse_job(data: Any, source: str = "job.yaml") -> Job:
    """Validate a parsed job document and build the `Job`."""
    if not isinstance(data, Mapping):
        raise JobError(f"{source}: a job is a mapping, found {type(data).__name__}")
    known = {"name", "ranks", "transport", "workload", "fabric"}
    for k in data:
        if k not in known:
            raise JobError(f"{source}: {k}: unknown key (known: {', '.join(sorted(known))})")
    raw_ranks = data.get("ranks")
    if not isinstance(raw_ranks, list) or not raw_ranks:
        raise JobError(f"{source}: ranks: a non-empty list of NICs is required")
    if len(raw_ranks) > MAX_RANKS:
        raise JobError(f"{source}: ranks: at most {MAX_RANKS} ranks, got {len(raw_ranks)}")
    ranks = []
    rank_keys = [f.name for f in dataclasses.fields(RankInfo) if f.name != "rank"]
    for i, r in enumerate(raw_ranks):
        if not isinstance(r, Mapping):
            raise JobError(f"{source}: ranks[{i}]: expected a mapping, got {r!r}")
        missing = [k for k in rank_keys if k not in r]
        extra = [k for k in r if k not in rank_keys]
        if missing or extra:
            raise JobError(f"{source}: ranks[{i}]: missing {missing} / unknown {extra}")
        ranks.append(RankInfo(rank=i, **r))
    fabric = data.get("fabric")
    transport = _resolve_from_fabric(_section(data, "transport", Transport, source), fabric, source)
    workload = _section(data, "workload", Workload, source)
    _validate(ranks, transport, workload, source)
    return Job(ranks=tuple(ranks), transport=transport, workload=workload,
               name=str(data.get("name", "job")), fabric=fabric)


def _validate(ranks: list[RankInfo], t: Transport, w: Workload, source: str) -> None:
    def fail(key: str, msg: str) -> None:
        raise JobError(f"{source}: {key}: {msg}")

    if not 64 <= t.mtu <= 4096:
        fail("transport.mtu", f"must be 64..4096 bytes, got {t.mtu}")
    if not 1 <= t.qps <= MAX_QPS:
        fail("transport.qps", f"1..{MAX_QPS} QPs per connection, got {t.qps}")
    if t.window < 1:
        fail("transport.window", f"must be >= 1 packet, got {t.window}")
    if t.line_mbps <= 0 or t.rto <= 0 or t.time_factor <= 0 or not t.timeline_s > 0:
        fail("transport", "line_mbps, rto, time_factor and timeline_s must be > 0")
    if t.nvlink_gbps < 0 or t.nvlink_latency_us < 0:
        fail("transport", f"nvlink_gbps and nvlink_latency_us must be >= 0, "
             f"got {t.nvlink_gbps}, {t.nvlink_latency_us}")
    if not 0 <= t.priority < dscp_priority(CNP_DSCP):
        fail("transport.priority", f"0..{dscp_priority(CNP_DSCP) - 1} (below the CNPs' priority), "
             f"got {t.priority}")
    if t.pxn and t.nvlink_gbps <= 0:
        fail("transport.pxn", "PXN relays over NVLink: it needs nvlink_gbps > 0")
    if t.ports not in PORT_MODES:
        fail("transport.ports", f"one of {', '.join(PORT_MODES)}, got {t.ports!r}")
    if w.op not in OPS:
        fail("workload.op", f"one of {', '.join(OPS)}, got {w.op!r}")
    if w.order not in ORDERS:
        fail("workload.order", f"one of {', '.join(ORDERS)}, got {w.order!r}")
    if w.algo not in ALGOS:
        fail("workload.algo", f"one of {', '.join(ALGOS)}, got {w.algo!r}")
    if w.algo == "tree" and w.op != "allreduce":
        fail("workload.algo", f"tree runs allreduce only, got op {w.op!r}")
    if w.algo == "tree" and w.trace is not None:
        fail("workload.algo", "tree runs sweeps, not traces (a trace's groups run rings)")
    if not w.sizes or any(not isinstance(s, int) or s < 1 for s in w.sizes):
        fail("workload.sizes", f"a list of positive byte counts, got {list(w.sizes)}")
    if w.iters < 1 or w.warmup < 0:
        fail("workload", f"iters >= 1 and warmup >= 0, got {w.iters}, {w.warmup}")
    if w.op == "sendrecv":
        for k, pair in enumerate(w.pairs):
            if len(pair) != 2 or pair[0] == pair[1] or not all(
                    isinstance(r, int) and 0 <= r < len(ranks) for r in pair):
                fail(f"workload.pairs[{k}]", f"two different ranks below {len(ranks)}, got {list(pair)}")
        if len(set(w.pairs)) != len(w.pairs) or not w.pairs:
            fail("workload.pairs", "a non-empty list of distinct (sender, receiver) pairs")
    if w.trace is not None:
        # Fail here, naming the trace file, not in the agents.
        check_trace(load_trace(w.trace), ranks, str(w.trace))
    seen: dict[str, int] = {}
    for r in ranks:
        if r.ip in seen:
            fail(f"ranks[{r.rank}].ip", f"{r.ip} already used by rank {seen[r.ip]}")
        seen[r.ip] = r.rank


def load_job(path: str | Path) -> Job:
    return parse_job(read_yaml(path, "the job file"), str(path))


def job_from_fabric(fabric_path: str | Path, workload: Workload, transport: Transport | None = None,
                    name: str = "job", emulated: bool = True) -> Job:
    """A job over every NIC of a fabric, ranks in the plan's order (server, then rail),
    with the fabric's host line rate and, unless ``transport`` sets them, its NVLink
    and time factor. ``emulated`` False: the fabric is only modelled (`scale`), its
    spec need not fit the emulated switches (`topo.spec.validate`)."""
    from topo.addressing import AddressPlan

    spec = load_spec(fabric_path, emulated=emulated)
    plan = AddressPlan(spec, emulated=emulated)
    ranks = []
    for nic in plan.nics():
        ranks.append(RankInfo(rank=len(ranks), server=nic.server, block=nic.block, rail=nic.rail,
                              iface=nic.intf, ip=nic.ip, mac=nic.mac,
                              gateway_mac=plan.switch(nic.leaf).mac))
    base = transport or Transport()
    # Filled from the spec in hand, so the Job does not read the file again.
    t = _filled_from(dataclasses.replace(base, line_mbps=spec.links.host_mbps), spec)
    job = Job(ranks=tuple(ranks), transport=t, workload=workload, name=name, fabric=str(fabric_path))
    _validate(ranks, job.transport, workload, str(fabric_path))
    return job


def renumbered(job: Job, order: list[int]) -> Job:
    """The same job with its ranks listed (and so numbered) in ``order`` (old rank
    numbers): how a job's "input order" is chosen."""
    if sorted(order) != list(range(len(job.ranks))):
        raise JobError(f"job {job.name!r}: a rank order must list every rank once, got {order}")
    ranks = tuple(dataclasses.replace(job.ranks[old], rank=new) for new, old in enumerate(order))
    return dataclasses.replace(job, ranks=ranks)
