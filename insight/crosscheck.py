"""The agents' word against the wire's: per flow an agent reports, did the captures
see the same bytes (within 1 %), and did every source port's frames take the path
`topo.hashmodel.predict_path` predicts?

An agent's record (tccl: ``results-<server>.json`` ``flows``) counts the frames its
requester put on the wire, retransmits included, as whole Ethernet frames -- what the
leaf's ingress capture of the sending NIC sees. Its QP number is the *local* one; the
frames carry the peer's (``index<<21 | 1<<20 | peer<<10 | local``, `tccl.job.qpn`, with
the record's ``qp_index``), which is how a record finds its captured rows, one per
source port the flow used.
"""

from __future__ import annotations

from typing import Any

from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, predict_path

# Captured and reported bytes agree when within this fraction of the reported bytes.
BYTES_TOLERANCE = 0.01


def wire_qpn(record: dict[str, Any]) -> int | None:
    """The QPN the record's data frames carry (the peer's QP of the same index within
    the connection: jobs may run several QPs per connection), when the record names
    both ranks."""
    from tccl.job import qpn
    local, peer, index = record.get("local_rank"), record.get("peer_rank"), record.get("qp_index", 0)
    if isinstance(local, int) and isinstance(peer, int) and isinstance(index, int):
        return qpn(peer, local, index)
    return None


def crosscheck(records: list[dict[str, Any]], flows: list[dict[str, Any]],
               plan: AddressPlan) -> dict[str, Any]:
    """One verdict per agent record that sent data (records of QPs that only answered
    are skipped: they put no data on the wire), and the totals."""
    results = []
    for rec in records:
        if not rec.get("packets"):
            continue
        qpn = wire_qpn(rec)
        rows = [f for f in flows if f["src"] == rec["src_ip"] and f["dst"] == rec["dst_ip"]
                and f["proto"] == "roce" and (qpn is None or f["qpn"] == qpn)]
        if qpn is None and "sport" in rec:
            rows = [f for f in rows if f["sport"] == rec["sport"]]
        captured = sum(f["bytes"] for f in rows)
        reported = int(rec["bytes"])
        diff = (captured - reported) / reported if reported else 0.0
        segments = []
        for f in rows:
            try:
                predicted = predict_path(plan, FiveTuple(f["src"], f["dst"], 17, f["sport"], f["dport"]))
            except KeyError:        # an address that is no NIC of the fabric: nothing to predict
                predicted = None
            segments.append({"sport": f["sport"], "path": f["path"], "predicted": predicted,
                             "paths_seen": len(f["paths"]),
                             "match": f["path"] == predicted and len(f["paths"]) == 1})
        results.append({
            "server": rec.get("server"), "qpn": rec.get("qpn"), "wire_qpn": qpn,
            "src": rec["src_ip"], "dst": rec["dst_ip"], "found": bool(rows),
            "reported_bytes": reported, "captured_bytes": captured,
            "reported_packets": int(rec["packets"]), "captured_packets": sum(f["packets"] for f in rows),
            "diff_pct": round(100 * diff, 3),
            "bytes_match": bool(rows) and abs(diff) <= BYTES_TOLERANCE,
            "segments": segments,
            "path_match": bool(segments) and all(s["match"] for s in segments),
        })
    return {"flows": results, "checked": len(results),
            "found": sum(r["found"] for r in results),
            "bytes_match": sum(r["bytes_match"] for r in results),
            "path_match": sum(r["path_match"] for r in results),
            "tolerance_pct": 100 * BYTES_TOLERANCE}
