"""One pass over a run's captures -> the summary (a JSON-ready dict).

`summarise` reads every port capture once, feeding each frame to the link-load bins of
the link it observes and to the flow table (`insight.flows`); the CPU port's capture
gives sampled queue depths; the run's other files (`insight.runfiles`) add GOR's
events, its telemetry and the agents' records for the cross-check (`insight.crosscheck`).

Times in the summary are seconds since ``t0``, the first captured frame (wall clock,
like the ``ts`` of GOR's events).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from insight.captures import IN, OUT, CaptureSet, Point, find_capture_dir, link_point, scan
from insight.crosscheck import crosscheck
from insight.flows import FlowTable, Row, paths_of
from insight.frames import decode_packet_in
from insight.pcapfile import PcapInfo, first_timestamp, read_records
from insight.runfiles import find_agent_results, read_agent_results, read_events, read_telemetry
from topo.addressing import AddressPlan
from topo.frames import decode
from topo.headers import ECN_CE

# Link load is binned at this width by default: 10 bins per second show DCQCN's
# reaction and a GOR move (hundreds of ms) without drowning a minute-long run.
DEFAULT_BIN_S = 0.1


class InspectError(ValueError):
    """The run cannot be summarised (no captures, unreadable file); names what."""


def _proto_name(proto: int, qpn: int) -> str:
    if qpn >= 0:
        return "roce"
    return {17: "udp", 6: "tcp", 1: "icmp"}.get(proto, f"ip{proto}")


class _Links:
    """Bytes per time bin per directed link, from one point per link."""

    def __init__(self, plan: AddressPlan, points: dict[Point, Path], bin_s: float) -> None:
        self.bin_s = bin_s
        self.mbps = {}
        self.point_of: dict[Point, str] = {}
        for link in plan.links:
            for a, b in ((link.a, link.b), (link.b, link.a)):
                self.mbps[f"{a}->{b}"] = link.mbps
                p = link_point(points, a, b)
                if p is not None:
                    self.point_of[p] = f"{a}->{b}"
        self.bins: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.packets: dict[str, int] = defaultdict(int)
        self.ce: dict[str, int] = defaultdict(int)


def summarise(run_dir: str | Path, plan: AddressPlan, bin_s: float = DEFAULT_BIN_S,
              capture_dir: str | Path | None = None,
              agent_files: list[Path] | None = None) -> dict[str, Any]:
    """The summary of the run in ``run_dir`` on the fabric of ``plan`` (see
    docs/inspection.md for every key)."""
    run_dir = Path(run_dir)
    if not bin_s > 0:
        raise InspectError(f"the time bin must be > 0 s, got {bin_s}")
    directory = Path(capture_dir) if capture_dir else find_capture_dir(run_dir)
    if not directory.is_dir():
        raise InspectError(f"{directory}: no such directory")
    captures = scan(directory, plan)
    if not captures.points:
        raise InspectError(f"{directory}: no port captures of fabric {plan.spec.name!r} "
                           f"(expected <switch>-eth<port>_in.pcap / _out.pcap)")
    firsts = [t for t in map(first_timestamp, [*captures.points.values(), *captures.cpu]) if t is not None]
    # Bins count from the first frame (ts - t0), which keeps their edges exact.
    t0 = min(firsts, default=0.0)
    servers = {s.name for s in plan.servers}
    links = _Links(plan, captures.points, bin_s)
    table = FlowTable(t0, bin_s)
    infos: list[PcapInfo] = []
    frames = _read_ports(captures, servers, links, table, t0, infos)
    samples = _packet_in_depths(captures, plan, infos)
    table.attribute_cnps()
    ports = {}
    for link in plan.links:
        ports[(link.a, link.b)] = (link.a_port, link.b_port)
        ports[(link.b, link.a)] = (link.b_port, link.a_port)
    point_list = list(captures.points)
    flows = [_row_summary(row, point_list, ports, servers, t0, bin_s)
             for row in sorted(table.rows.values(), key=lambda r: (r.first_ts or 0.0, r.key))]
    telemetry = read_telemetry(run_dir)
    if telemetry is not None:
        queues = {"source": "telemetry", "series": _relative(telemetry, t0)}
    elif samples:
        queues = {"source": "packet_in", "series": _relative(samples, t0)}
    else:
        queues = {"source": None, "series": {}}
    events = [{**e, "t_rel": round(e["ts"] - t0, 6)} for e in read_events(run_dir)]
    summary: dict[str, Any] = {
        "run_dir": str(run_dir),
        "fabric": plan.spec.name,
        "capture_dir": str(directory),
        "t0": t0,
        "bin_s": bin_s,
        "captures": {"files": len(captures.points), "cpu_files": len(captures.cpu), "frames": frames,
                     "ignored": captures.ignored,
                     "problems": [p for i in infos for p in i.problems]},
        "flows": flows,
        "unattributed_cnps": table.unattributed_cnps,
        "links": _link_summary(links, bin_s),
        "queues": queues,
        "events": events,
    }
    files = agent_files if agent_files is not None else find_agent_results(run_dir)
    if files:
        summary["crosscheck"] = crosscheck(read_agent_results(list(files)), flows, plan)
    return summary


def _read_ports(captures: CaptureSet, servers: set[str], links: _Links, table: FlowTable,
                t0: float, infos: list[PcapInfo]) -> int:
    """Feed every port capture's frames to the link bins and the flow table; returns
    the number of frames read."""
    frames = 0
    bin_s = links.bin_s
    for index, (point, path) in enumerate(captures.points.items()):
        info = PcapInfo(path)
        infos.append(info)
        link = links.point_of.get(point)
        facing_host = point.src in servers or point.dst in servers
        injection = facing_host and point.direction == IN
        delivery = facing_host and point.direction == OUT
        bins, add = (links.bins[link] if link else None), table.add
        for ts, frame in read_records(path, info):
            frames += 1
            pkt = decode(frame)
            if bins is not None:
                bins[int((ts - t0) / bin_s)] += len(frame)
                links.packets[link] += 1
                if pkt is not None and pkt.ecn == ECN_CE and point.direction == OUT:
                    links.ce[link] += 1
            if pkt is not None:
                add(index, injection, delivery, ts, pkt)
    return frames


def _packet_in_depths(captures: CaptureSet, plan: AddressPlan,
                      infos: list[PcapInfo]) -> dict[str, list[tuple[float, float]]]:
    """Queue depth per directed link from the sampled PacketIns' ``qdepth``: the depth
    of the egress queue the sampled packet joined, tagged with its switch id."""
    by_id = {sw.switch_id: sw.name for sw in plan.switches}
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for path in captures.cpu:
        info = PcapInfo(path)
        infos.append(info)
        for ts, data in read_records(path, info):
            decoded = decode_packet_in(data)
            if decoded is None or decoded[0] not in by_id:
                continue
            switch = by_id[decoded[0]]
            try:
                peer, _ = plan.peer(switch, decoded[2])
            except KeyError:
                continue
            series[f"{switch}->{peer}"].append((ts, float(decoded[3])))
    return {k: sorted(v) for k, v in series.items()}


def _relative(series: dict[str, list[tuple[float, float]]], t0: float) -> dict[str, list[list[float]]]:
    return {link: [[round(ts - t0, 6), depth] for ts, depth in points] for link, points in sorted(series.items())}


def _series(bins: dict[int, int], count: int) -> list[int]:
    return [bins.get(i, 0) for i in range(count)]


def _link_summary(links: _Links, bin_s: float) -> dict[str, Any]:
    used = [i for b in links.bins.values() for i in b]
    count = max(used) + 1 if used else 0
    out = {}
    for link, mbps in sorted(links.mbps.items()):
        observed = any(name == link for name in links.point_of.values())
        series = _series(links.bins.get(link, {}), count)
        capacity = mbps * 1e6 / 8 * bin_s
        util = [round(b / capacity, 4) for b in series]
        out[link] = {"mbps": mbps, "observed": observed, "packets": links.packets.get(link, 0),
                     "bytes": sum(series), "ce_marked": links.ce.get(link, 0),
                     "max_util": max(util, default=0.0),
                     "mean_util": round(sum(util) / len(util), 4) if util else 0.0,
                     "bytes_per_bin": series}
    return {"bins": count, "per_link": out}


def _row_summary(row: Row, points: list[Point], ports: dict[tuple[str, str], tuple[int, int]],
                 servers: set[str], t0: float, bin_s: float) -> dict[str, Any]:
    src, dst, proto, sport, dport, qpn = row.key
    paths = paths_of(row, points, ports, servers)
    bins = row.delivered_bins if row.delivered_packets else row.sent_bins
    # Dense from the row's first to its last busy bin: an idle bin is a rate of 0.
    span = range(min(bins), max(bins) + 1) if bins else range(0)
    rate = [(round(i * bin_s, 6), round(bins.get(i, 0) * 8 / bin_s, 1)) for i in span]
    return {
        "src": src, "dst": dst, "proto": _proto_name(proto, qpn), "sport": sport, "dport": dport,
        "qpn": qpn if qpn >= 0 else None,
        "packets": row.sent_packets, "bytes": row.sent_bytes,
        "delivered_packets": row.delivered_packets, "delivered_bytes": row.delivered_bytes,
        "retransmits": row.retransmits, "psn_gaps": row.psn_gaps, "psn_missing": row.psn_missing,
        "ce_marked": row.ce_marked,
        "ce_pct": round(100.0 * row.ce_marked / row.delivered_packets, 3) if row.delivered_packets else 0.0,
        "cnps": row.cnps,
        "first_s": round(row.first_ts - t0, 6) if row.first_ts is not None else None,
        "last_s": round(row.last_ts - t0, 6) if row.last_ts is not None else None,
        "path": list(paths[0].nodes) if paths else [],
        "hops": [vars(h) | {"marked": h.marked} for h in paths[0].hops] if paths else [],
        "paths": [{"nodes": list(p.nodes), "packets": p.packets} for p in paths],
        "rate_bps": [list(x) for x in rate],
    }
