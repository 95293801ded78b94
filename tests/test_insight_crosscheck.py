"""insight's cross-check on flow rows built by hand: a connection with two QPs (the
experiments run two per connection) -- each agent record must be judged against the
captured rows of its own QP, found by the QP index in the wire QPN."""

from __future__ import annotations

from pathlib import Path

import pytest

from insight.crosscheck import crosscheck, wire_qpn
from tccl.job import qpn
from topo.addressing import AddressPlan
from topo.hashmodel import FiveTuple, predict_path, source_port_for_spine
from topo.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plan() -> AddressPlan:
    return AddressPlan(load_spec(ROOT / "topo" / "fabrics" / "default.yaml"))


def row(plan: AddressPlan, src: str, dst: str, sport: int, number: int, nbytes: int,
        path: list[str] | None = None) -> dict:
    """A captured flow row as `insight.analyse.summarise` makes it (the fields the
    cross-check reads)."""
    path = path or predict_path(plan, FiveTuple(src, dst, 17, sport, 4791))
    return {"src": src, "dst": dst, "proto": "roce", "qpn": number, "sport": sport, "dport": 4791,
            "bytes": nbytes, "packets": nbytes // 1000, "path": path, "paths": [path]}


def record(src: str, dst: str, local: int, peer: int, index: int, sport: int, nbytes: int) -> dict:
    return {"local_rank": local, "peer_rank": peer, "qp_index": index, "qpn": qpn(local, peer, index),
            "src_ip": src, "dst_ip": dst, "sport": sport, "bytes": nbytes, "packets": nbytes // 1000}


def test_two_qps_of_one_connection_are_each_judged_on_their_own_frames(plan: AddressPlan) -> None:
    src, dst = "10.0.0.1", "10.0.1.1"
    s0 = source_port_for_spine(plan, FiveTuple(src, dst), 0, start=50000)
    s1 = source_port_for_spine(plan, FiveTuple(src, dst), 1, start=50000)
    rows = [row(plan, src, dst, s0, qpn(7, 0, 0), 69_000), row(plan, src, dst, s1, qpn(7, 0, 1), 52_000)]
    records = [record(src, dst, 0, 7, 0, s0, 69_000), record(src, dst, 0, 7, 1, s1, 52_000)]
    assert [wire_qpn(r) for r in records] == [qpn(7, 0, 0), qpn(7, 0, 1)]
    cc = crosscheck(records, rows, plan)
    assert (cc["checked"], cc["found"], cc["bytes_match"], cc["path_match"]) == (2, 2, 2, 2)
    assert [r["captured_bytes"] for r in cc["flows"]] == [69_000, 52_000]
    assert [[s["sport"] for s in r["segments"]] for r in cc["flows"]] == [[s0], [s1]]


def test_a_record_without_qp_index_is_index_zero(plan: AddressPlan) -> None:
    src, dst = "10.0.0.1", "10.0.1.1"
    rows = [row(plan, src, dst, 50000, qpn(7, 0, 0), 5000), row(plan, src, dst, 50001, qpn(7, 0, 1), 9000)]
    rec = record(src, dst, 0, 7, 0, 50000, 5000)
    del rec["qp_index"]
    [r] = crosscheck([rec], rows, plan)["flows"]
    assert r["captured_bytes"] == 5000 and r["bytes_match"]


def test_a_path_off_the_prediction_is_no_match(plan: AddressPlan) -> None:
    src, dst = "10.0.0.1", "10.0.1.1"
    sport = source_port_for_spine(plan, FiveTuple(src, dst), 0, start=50000)
    predicted = predict_path(plan, FiveTuple(src, dst, 17, sport, 4791))
    other = predicted[:2] + [plan.spines[1].name] + predicted[3:]
    [r] = crosscheck([record(src, dst, 0, 7, 0, sport, 4000)],
                     [row(plan, src, dst, sport, qpn(7, 0, 0), 4000, other)], plan)["flows"]
    assert r["bytes_match"] and not r["path_match"] and r["segments"][0]["predicted"] == predicted
